//! The `kafka` adapter (also answering to `redpanda`): a topic prefix per world.
//!
//! # What a slice is
//! Kafka has no namespace primitive, so a slice is a *prefix*: a world's topics are named
//! `<prefix>.<topic>` (`bk_acme_login_fix_events.orders`), where the prefix is the slice's
//! name. The topics listed in `options.topics` are created by `provision`; any other topic
//! the application creates under the prefix (brokers with `auto.create.topics.enable`, or
//! the application's own admin calls) belongs to the slice just the same, and `teardown`
//! deletes it too.
//!
//! `${events.url}` is `kafka://<bootstrap>/<prefix>` (binky 0.1.2's form); the tokens are
//! `${events.prefix}` (the prefix, without the dot), `${events.bootstrap}` (the
//! `host:port,…` list a client library takes as its bootstrap servers) and
//! `${events.topics}` (the listed topics' full names, comma-separated).
//!
//! # Options (binky 0.1.2's names)
//! - `topics`: comma-separated topic names to create, without the prefix (`"orders,payments"`).
//!   Without it nothing is created: the application makes its topics itself.
//! - `partitions`: partitions per created topic (default 1).
//! - `replication`: replication factor per created topic (default 1).
//!
//! `admin_url` is `kafka://HOST:9092[,HOST2:9092]` or a bare `HOST:9092[,…]` (`redpanda://`
//! is the same); without it, `$BINKY_KAFKA_URL` (of the daemon's environment) is used.
//!
//! # Isolation: by convention only
//! **Nothing on the broker enforces this isolation.** Every world connects with the same
//! (absent) credentials and can read, write and delete every topic of the broker, another
//! world's included; consumer groups and transactional ids are not namespaced either (prefix
//! them with `${events.prefix}` in the application). Kafka's own primitive for this would be
//! ACLs on prefixed resource patterns, but rskafka, the client binky uses, has no ACL API
//! and tansu, the broker binky is tested against, has no ACLs; brokers with SASL are
//! refused rather than half-supported. The slice keeps worlds from colliding by mistake,
//! not from a process that ignores its prefix.
//!
//! # Which home made a slice
//! An empty topic `<prefix>.__binky_home_<id>` ([`marker_topic`]; see
//! [`crate::adapters::Maker`]), made when the home claims the slice, even one without
//! topics, and deleted last at teardown. Applications listing the topics under their prefix
//! see it. Of two markers a race left, the first by name counts, for every home alike.
//!
//! # Guarantees
//! - `provision` is idempotent: it creates the listed topics that are missing (a topic made
//!   by a concurrent provision is fine) and leaves existing ones as they are (their
//!   partition count is not changed).
//! - `teardown` deletes every topic whose name starts with `<prefix>.`, listed or not, and
//!   succeeds when there is none; one prefix is never the start of another world's
//!   (slice names hold no `.`).
//! - Every call is bounded (10 s): a broker that is down or silent gives
//!   [`AdapterError::Unreachable`], a broker error [`AdapterError::Server`].
//!
//! # Decisions
//! - The prefix is always the slice's name (at most 63 characters), never shortened to make
//!   room for a long topic: a prefix that changed with `options.topics` would strand the old
//!   topics, and `binky gc` could not tell a shortened prefix from an orphan. A listed topic
//!   too long for Kafka's 249-character limit is refused, naming the longest that fits.
//! - `exists` answers only when `topics` is set (whether any topic under the prefix is
//!   left): without it a world that has not published yet legitimately has no topic, and
//!   "missing" would make binky migrate and seed it again.
//!
//! # Caveats
//! - Kafka refuses a topic whose name equals an existing one once `.` and `_` are treated
//!   alike (`a.b` vs `a_b`, for its metric names): in principle one world's topic can block
//!   the creation of another's. Slice names make that improbable, not impossible.
//! - Deleting a topic is asynchronous on real Kafka: right after `teardown` the topics may
//!   still be listed for a moment while the controller removes them.
//! - TLS listeners and SASL are not supported (rskafka is built without them).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::Duration;

use rskafka::client::error::{Error as KafkaError, ProtocolError, RequestError};
use rskafka::client::{Client, ClientBuilder};
use rskafka::BackoffConfig;

use binky_controllers::url::{host_port, Url};

use super::{Adapter, AdapterConfig, AdapterError, Address, Maker, Result, Slice};

/// The environment variable read when a service has no `admin_url` (binky 0.1.2's).
pub const ENV_URL: &str = super::AdapterKind::Kafka.env_var();
/// Kafka's limit on a topic name's length.
pub const MAX_TOPIC: usize = 249;
/// The port of a broker address written without one.
const DEFAULT_PORT: u16 = 9092;
/// Bound on one adapter call (connecting, metadata, creating and deleting topics).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// rskafka retries broken connections with backoff, by default forever: give up earlier
/// than [`CALL_TIMEOUT`] so its own error (naming the broker) is what the user sees.
const RETRY_DEADLINE: Duration = Duration::from_secs(7);
/// The broker-side timeout of CreateTopics and DeleteTopics.
const BROKER_TIMEOUT_MS: i32 = 5_000;

/// The kafka (and redpanda) adapter. It cannot clone: Kafka cannot copy a topic's records
/// server-side.
pub struct Kafka;

/// The broker, from `admin_url`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Broker {
    /// `host:port` of each bootstrap broker, as written (IPv6 in brackets).
    pub bootstrap: Vec<String>,
}

impl Broker {
    /// The broker of `cfg`: its `admin_url`, else `$BINKY_KAFKA_URL`.
    pub fn from_config(cfg: &AdapterConfig) -> Result<Broker> {
        let url = cfg.admin_url_else_env(
            ENV_URL,
            &format!(
                "the kafka adapter needs the broker's address: set `admin_url = \
                 \"kafka://HOST:9092\"` on the service in binky.toml (or ${ENV_URL} in the \
                 daemon's environment)"
            ),
        )?;
        Broker::parse(&url)
    }

    /// `kafka://h1:9092,h2:9092`, `redpanda://h:9092` or a bare `h1:9092,h2`.
    pub fn parse(url: &str) -> Result<Broker> {
        let shown = super::redact(url);
        let bad = |why: &str| {
            AdapterError::Config(format!(
                "admin_url `{shown}`: {why}; write it as kafka://HOST:9092[,HOST2:9092]"
            ))
        };
        let parts = match Url::parse(url) {
            Some(parts) => match parts.scheme.to_ascii_lowercase().as_str() {
                "kafka" | "redpanda" | "plaintext" => parts,
                "kafka+ssl" | "kafkas" | "ssl" | "sasl_ssl" | "redpanda+ssl" => {
                    return Err(bad(
                        "TLS listeners are not supported by binky's kafka adapter (rskafka is \
                         built without TLS); point it at a PLAINTEXT listener",
                    ))
                }
                "sasl_plaintext" => return Err(sasl_refused(&shown)),
                other => return Err(bad(&format!("`{other}://` is not a Kafka address"))),
            },
            None => Url::after_scheme("", url),
        };
        if parts.userinfo.is_some() {
            return Err(sasl_refused(&shown));
        }
        let mut bootstrap = Vec::new();
        for host in parts.host.split(',').map(str::trim) {
            if host.is_empty() {
                return Err(bad("an empty broker address"));
            }
            bootstrap.push(with_port(host).ok_or_else(|| bad(&format!("bad broker `{host}`")))?);
        }
        if bootstrap.is_empty() {
            return Err(bad("no broker"));
        }
        Ok(Broker { bootstrap })
    }

    /// `host:port,host:port`: what client libraries take as bootstrap servers.
    pub fn bootstrap_list(&self) -> String {
        self.bootstrap.join(",")
    }

    /// `kafka://host:port,…`, for messages.
    fn shown(&self) -> String {
        format!("kafka://{}", self.bootstrap_list())
    }

    /// A connected client (metadata fetched), within [`CALL_TIMEOUT`].
    async fn connect(&self) -> Result<Client> {
        let backoff = BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            base: 3.,
            deadline: Some(RETRY_DEADLINE),
        };
        let build = ClientBuilder::new(self.bootstrap.clone())
            .client_id("binky")
            .backoff_config(backoff)
            .build();
        let client = self.bounded("connecting", build).await?;
        Ok(client)
    }

    /// Run one broker call within [`CALL_TIMEOUT`], its error mapped.
    async fn bounded<T>(
        &self,
        doing: &str,
        call: impl Future<Output = Result<T, KafkaError>>,
    ) -> Result<T> {
        match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(self.error(doing, &e)),
            Err(_) => Err(AdapterError::Unreachable {
                server: self.shown(),
                detail: format!("{doing}: no answer within {} s", CALL_TIMEOUT.as_secs()),
            }),
        }
    }

    /// A client error as an adapter error: unreachable (worth retrying) or not.
    fn error(&self, doing: &str, e: &KafkaError) -> AdapterError {
        let server = self.shown();
        let detail = format!("{doing}: {e}");
        match e {
            KafkaError::ServerError { protocol_error, .. } => {
                if retriable(protocol_error) {
                    AdapterError::Unreachable { server, detail }
                } else {
                    AdapterError::Server {
                        server,
                        detail: format!("{detail}{}", hint(protocol_error)),
                    }
                }
            }
            KafkaError::Request(RequestError::NoVersionMatch { api_key }) => AdapterError::Server {
                server,
                detail: format!(
                    "{doing}: the broker does not support the {api_key:?} request, which binky \
                     needs"
                ),
            },
            KafkaError::InvalidResponse(_) => AdapterError::Server { server, detail },
            // Refused, reset, timed out, retries exhausted: the broker is not there (yet).
            _ => AdapterError::Unreachable { server, detail },
        }
    }

    /// Every topic's name.
    async fn topics(&self, client: &Client) -> Result<Vec<String>> {
        let topics = self.bounded("listing topics", client.list_topics()).await?;
        Ok(topics.into_iter().map(|t| t.name).collect())
    }
}

/// `call`, done also when the broker answers `already`: a topic made or deleted by
/// someone else since it was listed.
async fn done_or_already(
    call: impl Future<Output = Result<(), KafkaError>>,
    already: ProtocolError,
) -> Result<(), KafkaError> {
    match call.await {
        Err(KafkaError::ServerError { protocol_error, .. }) if protocol_error == already => Ok(()),
        other => other,
    }
}

/// A broker address with its port (`h` → `h:9092`, `[::1]` → `[::1]:9092`).
fn with_port(host: &str) -> Option<String> {
    let (name, port) = host_port(host)?;
    if name == "[]" {
        return None;
    }
    let ok_name = !name.is_empty()
        && !name.contains(['/', '?', '#', ' ', '@'])
        && (name.starts_with('[') || !name.contains(':'));
    if !ok_name {
        return None;
    }
    let port = match port {
        Some(p) => p.parse::<u16>().ok().filter(|p| *p != 0)?,
        None => DEFAULT_PORT,
    };
    Some(format!("{name}:{port}"))
}

fn sasl_refused(shown: &str) -> AdapterError {
    AdapterError::Config(format!(
        "admin_url `{shown}` carries credentials, but binky's kafka adapter does not support \
         SASL (nor TLS): point it at a PLAINTEXT listener without credentials, \
         kafka://HOST:9092"
    ))
}

/// Errors the broker itself calls transient.
fn retriable(e: &ProtocolError) -> bool {
    matches!(
        e,
        ProtocolError::LeaderNotAvailable
            | ProtocolError::NotLeaderOrFollower
            | ProtocolError::RequestTimedOut
            | ProtocolError::BrokerNotAvailable
            | ProtocolError::NetworkException
            | ProtocolError::CoordinatorLoadInProgress
            | ProtocolError::CoordinatorNotAvailable
            | ProtocolError::NotCoordinator
            | ProtocolError::NotController
            | ProtocolError::NotEnoughReplicas
            | ProtocolError::NotEnoughReplicasAfterAppend
            | ProtocolError::KafkaStorageError
            | ProtocolError::ThrottlingQuotaExceeded
    )
}

/// What to do about a permanent broker error.
fn hint(e: &ProtocolError) -> &'static str {
    match e {
        ProtocolError::InvalidReplicationFactor => {
            "; set options.replication to at most the number of brokers"
        }
        ProtocolError::InvalidPartitions => "; set options.partitions to 1 or more",
        ProtocolError::TopicDeletionDisabled => {
            "; the broker has delete.topic.enable=false, so binky cannot remove a world's \
             topics: enable it"
        }
        ProtocolError::TopicAuthorizationFailed | ProtocolError::ClusterAuthorizationFailed => {
            "; the broker's ACLs refuse binky: allow it to describe, create and delete topics"
        }
        _ => "",
    }
}

/// The topic options, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicPlan {
    /// The listed topics, without the prefix, in the order written (duplicates dropped).
    pub topics: Vec<String>,
    /// Partitions per created topic.
    pub partitions: i32,
    /// Replication factor per created topic.
    pub replication: i16,
}

impl TopicPlan {
    /// `options.topics`, `options.partitions`, `options.replication`.
    pub fn from_options(options: &BTreeMap<String, String>) -> Result<TopicPlan> {
        let mut topics: Vec<String> = Vec::new();
        for t in options
            .get("topics")
            .map(String::as_str)
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            if !topic_charset(t) {
                return Err(AdapterError::Config(format!(
                    "options.topics: `{t}` is not a Kafka topic name: use letters, digits, \
                     `.`, `_` and `-` only"
                )));
            }
            if !topics.iter().any(|x| x == t) {
                topics.push(t.to_owned());
            }
        }
        let number = |key: &str| -> Result<Option<i64>> {
            match options.get(key).map(|v| v.trim()).filter(|v| !v.is_empty()) {
                None => Ok(None),
                Some(v) => v
                    .parse::<i64>()
                    .ok()
                    .filter(|n| *n >= 1)
                    .map(Some)
                    .ok_or_else(|| {
                        AdapterError::Config(format!(
                            "options.{key} = \"{v}\": write a whole number, 1 or more"
                        ))
                    }),
            }
        };
        let partitions = number("partitions")?.unwrap_or(1);
        let replication = number("replication")?.unwrap_or(1);
        let partitions = i32::try_from(partitions).map_err(|_| {
            AdapterError::Config(format!("options.partitions = {partitions} is too large"))
        })?;
        let replication = i16::try_from(replication).map_err(|_| {
            AdapterError::Config(format!("options.replication = {replication} is too large"))
        })?;
        Ok(TopicPlan {
            topics,
            partitions,
            replication,
        })
    }

    /// The listed topics' full names under `prefix`; an error names a topic that cannot fit
    /// Kafka's limit and the longest that would.
    pub fn full_names(&self, prefix: &str) -> Result<Vec<String>> {
        let room = MAX_TOPIC.saturating_sub(prefix.len() + 1);
        self.topics
            .iter()
            .map(|t| {
                if t.len() > room {
                    Err(AdapterError::Config(format!(
                        "options.topics: `{t}` is {} characters; with the world's prefix \
                         `{prefix}.` in front it would pass Kafka's {MAX_TOPIC}-character limit \
                         for topic names: shorten it to at most {room} characters",
                        t.len()
                    )))
                } else {
                    Ok(topic_name(prefix, t))
                }
            })
            .collect()
    }
}

/// Kafka's topic charset: `[a-zA-Z0-9._-]`.
fn topic_charset(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The slice's topic prefix: its name, which must be a topic name without a `.` (the dot
/// separates prefix and topic) and leave room for a topic.
pub fn prefix(slice: &Slice) -> Result<String> {
    let name = slice.name.as_str();
    if !topic_charset(name) || name.contains('.') || name.len() > 63 {
        return Err(AdapterError::Config(format!(
            "slice name `{name}` cannot be a Kafka topic prefix: 1 to 63 of `[a-zA-Z0-9_-]`"
        )));
    }
    Ok(name.to_owned())
}

/// `<prefix>.<topic>`.
pub fn topic_name(prefix: &str, topic: &str) -> String {
    format!("{prefix}.{topic}")
}

/// Does `topic` belong to the slice with this prefix?
pub fn in_slice(prefix: &str, topic: &str) -> bool {
    topic
        .strip_prefix(prefix)
        .is_some_and(|rest| rest.starts_with('.'))
}

/// What the topic marking a slice as a home's starts with after `<prefix>.`: the topic
/// `<prefix>.__binky_home_<home>` (one partition, never written) is the slice's mark, the
/// one record of a home a broker keeps without a catalog to read (rskafka has no API for
/// topic configs). It goes with the slice's other topics at teardown, last.
pub const HOME_MARKER: &str = "__binky_home_";

/// The topic marking the slice with `prefix` as `home`'s.
pub fn marker_topic(prefix: &str, home: &str) -> String {
    topic_name(prefix, &format!("{HOME_MARKER}{home}"))
}

/// The home `topic` marks the slice with `prefix` as made by, if it is such a marker.
pub fn marked_home<'a>(prefix: &str, topic: &'a str) -> Option<&'a str> {
    let home = topic
        .strip_prefix(prefix)?
        .strip_prefix('.')?
        .strip_prefix(HOME_MARKER)?;
    super::mark::is_home_id(home).then_some(home)
}

/// Which home the markers among `topics` name for the slice with `prefix` (the first, by
/// name, when a race left two); unmarked when only its other topics are there, absent
/// when none is.
pub fn maker_among(prefix: &str, topics: &[String]) -> Maker {
    let mut homes: Vec<&str> = topics
        .iter()
        .filter_map(|t| marked_home(prefix, t))
        .collect();
    homes.sort();
    match homes.first() {
        Some(home) => Maker::Home((*home).to_owned()),
        None if topics.iter().any(|t| in_slice(prefix, t)) => Maker::Unmarked,
        None => Maker::Absent,
    }
}

/// The slice prefixes among `topics`: the part before the first `.` of every topic that
/// starts with `bk_` and has one.
pub fn prefixes_of<'a>(topics: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    topics
        .into_iter()
        .filter(|t| t.starts_with("bk_"))
        .filter_map(|t| t.split_once('.').map(|(p, _)| p.to_owned()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

#[async_trait::async_trait]
impl Adapter for Kafka {
    fn kind(&self) -> Option<super::AdapterKind> {
        Some(super::AdapterKind::Kafka)
    }

    async fn provision(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        let prefix = prefix(slice)?;
        let plan = TopicPlan::from_options(&cfg.options)?;
        let wanted = plan.full_names(&prefix)?;
        let broker = Broker::from_config(cfg)?;
        // Reachability is checked even without topics: a world should wait for a broker
        // that is down rather than start against nothing.
        let client = broker.connect().await?;
        if wanted.is_empty() {
            return Ok(());
        }
        let existing: BTreeSet<String> = broker.topics(&client).await?.into_iter().collect();
        let controller = client
            .controller_client()
            .map_err(|e| broker.error("reaching the controller", &e))?;
        for topic in wanted.iter().filter(|t| !existing.contains(*t)) {
            let create = controller.create_topic(
                topic.as_str(),
                plan.partitions,
                plan.replication,
                BROKER_TIMEOUT_MS,
            );
            // Made since we listed (a concurrent provision): fine.
            let create = done_or_already(create, ProtocolError::TopicAlreadyExists);
            broker
                .bounded(&format!("creating topic {topic}"), create)
                .await?;
        }
        Ok(())
    }

    async fn resolve(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Address> {
        let prefix = prefix(slice)?;
        let plan = TopicPlan::from_options(&cfg.options)?;
        let topics = plan.full_names(&prefix)?;
        let broker = Broker::from_config(cfg)?;
        let bootstrap = broker.bootstrap_list();
        Ok(Address::new(
            format!("kafka://{bootstrap}/{prefix}"),
            [
                ("prefix", prefix),
                ("bootstrap", bootstrap),
                ("topics", topics.join(",")),
            ],
        ))
    }

    async fn teardown(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        let prefix = prefix(slice)?;
        let broker = Broker::from_config(cfg)?;
        let client = broker.connect().await?;
        let doomed: Vec<String> = broker
            .topics(&client)
            .await?
            .into_iter()
            .filter(|t| in_slice(&prefix, t))
            .collect();
        if doomed.is_empty() {
            return Ok(());
        }
        // The home's mark last: a teardown cut short before it is still that home's to
        // finish.
        let mut doomed = doomed;
        doomed.sort_by_key(|t| marked_home(&prefix, t).is_some());
        let controller = client
            .controller_client()
            .map_err(|e| broker.error("reaching the controller", &e))?;
        for topic in &doomed {
            let delete = controller.delete_topic(topic.as_str(), BROKER_TIMEOUT_MS);
            // Gone since we listed: fine.
            let delete = done_or_already(delete, ProtocolError::UnknownTopicOrPartition);
            broker
                .bounded(&format!("deleting topic {topic}"), delete)
                .await?;
        }
        Ok(())
    }

    async fn list(&self, cfg: &AdapterConfig) -> Result<Vec<String>> {
        let broker = Broker::from_config(cfg)?;
        let client = broker.connect().await?;
        let topics = broker.topics(&client).await?;
        Ok(prefixes_of(topics.iter().map(String::as_str)))
    }

    async fn exists(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Option<bool>> {
        let prefix = prefix(slice)?;
        let plan = TopicPlan::from_options(&cfg.options)?;
        if plan.topics.is_empty() {
            // Topics are the application's to create: none yet is no sign of a drop.
            return Ok(None);
        }
        let broker = Broker::from_config(cfg)?;
        let client = broker.connect().await?;
        let topics = broker.topics(&client).await?;
        // The home's marker is binky's, not the slice's topics.
        Ok(Some(topics.iter().any(|t| {
            in_slice(&prefix, t) && marked_home(&prefix, t).is_none()
        })))
    }

    async fn maker(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Maker> {
        let prefix = prefix(slice)?;
        let broker = Broker::from_config(cfg)?;
        let client = broker.connect().await?;
        Ok(maker_among(&prefix, &broker.topics(&client).await?))
    }

    async fn claim(&self, slice: &Slice, cfg: &AdapterConfig, home: &str) -> Result<Maker> {
        let prefix = prefix(slice)?;
        super::check_home(home)?;
        let plan = TopicPlan::from_options(&cfg.options)?;
        let broker = Broker::from_config(cfg)?;
        let client = broker.connect().await?;
        let found = maker_among(&prefix, &broker.topics(&client).await?);
        if found.other_than(home).is_some() || found == Maker::Home(home.to_owned()) {
            return Ok(found);
        }
        // A slice without topics yet is marked too: the marker is then what makes it.
        let marker = marker_topic(&prefix, home);
        let controller = client
            .controller_client()
            .map_err(|e| broker.error("reaching the controller", &e))?;
        let create =
            controller.create_topic(marker.as_str(), 1, plan.replication, BROKER_TIMEOUT_MS);
        let create = done_or_already(create, ProtocolError::TopicAlreadyExists);
        broker
            .bounded(&format!("creating topic {marker}"), create)
            .await?;
        Ok(maker_among(&prefix, &broker.topics(&client).await?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(name: &str) -> Slice {
        Slice {
            name: name.into(),
            secret: "unused".into(),
        }
    }

    fn options(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn admin_urls_of_0_1_2_are_understood() {
        let b = |u: &str| Broker::parse(u).expect(u).bootstrap;
        assert_eq!(b("kafka://127.0.0.1:9092"), ["127.0.0.1:9092"]);
        assert_eq!(b("kafka://h1:9092,h2:9093/"), ["h1:9092", "h2:9093"]);
        assert_eq!(b("h1:19092, h2"), ["h1:19092", "h2:9092"]);
        assert_eq!(b("redpanda://rp"), ["rp:9092"]);
        assert_eq!(b("kafka://[::1]:9094,[::1]"), ["[::1]:9094", "[::1]:9092"]);
        assert_eq!(
            Broker::parse("kafka://a:1,b:2")
                .expect("parses")
                .bootstrap_list(),
            "a:1,b:2"
        );
    }

    #[test]
    fn unusable_admin_urls_name_the_fix_without_a_password() {
        for url in [
            "kafka://user:topsecret@h:9092",
            "sasl_plaintext://u:topsecret@h",
        ] {
            let err = Broker::parse(url).expect_err(url);
            let text = err.to_string();
            assert!(matches!(err, AdapterError::Config(_)), "{text}");
            assert!(text.contains("SASL"), "{text}");
            assert!(!text.contains("topsecret"), "{text}");
        }
        for (url, says) in [
            ("kafka+ssl://h:9093", "TLS"),
            ("http://h:9092", "not a Kafka address"),
            ("kafka://h:notaport", "bad broker"),
            ("kafka://h:0", "bad broker"),
            ("kafka://h1,,h2", "empty"),
            ("kafka://", "empty"),
        ] {
            let text = Broker::parse(url).expect_err(url).to_string();
            assert!(text.contains(says), "{url}: {text}");
            assert!(text.contains("kafka://HOST:9092"), "{url}: {text}");
        }
    }

    #[test]
    fn options_are_binky_0_1_2s_and_are_checked() {
        let plan = TopicPlan::from_options(&options(&[
            ("topics", " orders, payments.v1 ,,orders"),
            ("partitions", "3"),
        ]))
        .expect("valid");
        assert_eq!(plan.topics, ["orders", "payments.v1"]);
        assert_eq!((plan.partitions, plan.replication), (3, 1));
        let none = TopicPlan::from_options(&BTreeMap::new()).expect("valid");
        assert!(none.topics.is_empty());
        assert_eq!((none.partitions, none.replication), (1, 1));
        for (k, v) in [
            ("partitions", "0"),
            ("partitions", "x"),
            ("replication", "-1"),
            ("replication", "40000"),
            ("topics", "ok,not ok"),
            ("topics", "ümlaut"),
        ] {
            let err = TopicPlan::from_options(&options(&[(k, v)])).expect_err(v);
            assert!(err.to_string().contains(&format!("options.{k}")), "{err}");
        }
    }

    #[test]
    fn topics_are_prefixed_and_a_topic_too_long_for_kafka_is_refused_clearly() {
        let p = prefix(&slice("bk_acme_login_fix_events")).expect("prefix");
        assert_eq!(p, "bk_acme_login_fix_events");
        let plan = TopicPlan::from_options(&options(&[("topics", "orders")])).expect("plan");
        assert_eq!(
            plan.full_names(&p).expect("fits"),
            ["bk_acme_login_fix_events.orders"]
        );
        // Exactly at the limit fits; one more does not.
        let room = MAX_TOPIC - p.len() - 1;
        let fits = "t".repeat(room);
        let plan = TopicPlan::from_options(&options(&[("topics", &fits)])).expect("plan");
        assert_eq!(plan.full_names(&p).expect("fits")[0].len(), MAX_TOPIC);
        let long = "t".repeat(room + 1);
        let plan = TopicPlan::from_options(&options(&[("topics", &long)])).expect("plan");
        let err = plan.full_names(&p).expect_err("too long").to_string();
        assert!(err.contains("249"), "{err}");
        assert!(err.contains(&format!("at most {room}")), "{err}");
    }

    #[test]
    fn a_prefix_is_never_the_start_of_another_worlds_topics() {
        assert!(in_slice("bk_a", "bk_a.orders"));
        assert!(in_slice("bk_a", "bk_a.orders.v2"));
        assert!(!in_slice("bk_a", "bk_ab.orders"));
        assert!(!in_slice("bk_a", "bk_a_b.orders"));
        assert!(!in_slice("bk_a", "bk_a"));
        assert!(!in_slice("bk_a", "bk_aorders"));
        for bad in ["bk_a.b", "bk a", "", "bk_*"] {
            assert!(prefix(&slice(bad)).is_err(), "{bad}");
        }
        assert!(prefix(&slice(&format!("bk_{}", "x".repeat(61)))).is_err());
    }

    #[test]
    fn listing_finds_each_worlds_prefix_once() {
        let topics = [
            "bk_a.orders",
            "bk_a.payments",
            "bk_b.x.y",
            "orders",
            "bk_nodot",
            "__consumer_offsets",
        ];
        assert_eq!(prefixes_of(topics), ["bk_a", "bk_b"]);
    }

    #[test]
    fn the_address_is_0_1_2s_url_with_prefix_and_bootstrap_tokens() {
        let cfg = AdapterConfig {
            admin_url: Some("kafka://127.0.0.1:9092,h2".into()),
            options: options(&[("topics", "orders,payments")]),
            ..AdapterConfig::default()
        };
        let a = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
            .block_on(Kafka.resolve(&slice("bk_w_events"), &cfg))
            .expect("resolves");
        assert_eq!(a.url, "kafka://127.0.0.1:9092,h2:9092/bk_w_events");
        assert_eq!(a.tokens["prefix"], "bk_w_events");
        assert_eq!(a.tokens["bootstrap"], "127.0.0.1:9092,h2:9092");
        assert_eq!(
            a.tokens["topics"],
            "bk_w_events.orders,bk_w_events.payments"
        );
    }

    #[test]
    fn a_marker_topic_names_the_home_and_belongs_to_its_slice_alone() {
        let p = "bk_h2k4m6p7_shop_w_events";
        let marker = marker_topic(p, "h2k4m6p7");
        assert_eq!(marker, "bk_h2k4m6p7_shop_w_events.__binky_home_h2k4m6p7");
        assert!(in_slice(p, &marker));
        assert_eq!(marked_home(p, &marker), Some("h2k4m6p7"));
        assert_eq!(marked_home("bk_h2k4m6p7_shop_w", &marker), None);
        assert_eq!(marked_home(p, &format!("{p}.__binky_home_NOTAHOME")), None);
        assert_eq!(marked_home(p, &format!("{p}.orders")), None);
        let topics = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(maker_among(p, &topics(&[])), Maker::Absent);
        assert_eq!(
            maker_among(
                p,
                &topics(&["bk_other.orders", "bk_h2k4m6p7_shop_w_events2.x"])
            ),
            Maker::Absent
        );
        assert_eq!(
            maker_among(p, &topics(&[&format!("{p}.orders")])),
            Maker::Unmarked
        );
        let two = [
            marker_topic(p, "q7r2s3t4"),
            marker.clone(),
            format!("{p}.orders"),
        ];
        assert_eq!(
            maker_among(p, &two),
            Maker::Home("h2k4m6p7".into()),
            "the first by name wins, for every home alike"
        );
        // gc finds a slice by its marker alone.
        assert_eq!(prefixes_of([marker.as_str()]), [p]);
    }
}
