//! Adapters: how binky carves a private slice (a database, a key prefix, …) for each world
//! out of one shared server.
//!
//! The contract is binky 0.1.2's four verbs: `provision`, `resolve` (the slice's address),
//! `teardown` and `capabilities`, plus `clone` where the server can copy server-side.
//! Built-in adapters are Rust types, one per [`AdapterKind`]: what each is (its names,
//! `name@version`, its admin-URL variable, tokens, clone, managed server) is the one table
//! in [`kind`], which the rest of binky asks. Any other name runs the external executable
//! `binky-adapter-<name>` (see [`external`]).
//!
//! # Guarantees
//! - Every verb is idempotent: provisioning a slice that exists, or tearing down one that
//!   is gone, succeeds.
//! - A slice's credentials are its own: a world's address cannot reach another world's
//!   slice (enforced by the server: roles, ACL users).
//! - Services see only their slice's address, never the admin URL.

pub mod clickhouse;
pub mod elasticsearch;
pub mod external;
pub mod http;
#[cfg(test)]
mod http_fake;
pub mod kafka;
pub mod kind;
pub mod mongodb;
pub mod mysql;
pub mod postgres;
pub mod qdrant;
pub mod rabbitmq;
pub mod redis;
pub mod s3;
#[cfg(test)]
mod testing;
pub mod tokens;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use kind::AdapterKind;

/// What an adapter's work gives: `T`, or an [`AdapterError`] (another error when named).
pub type Result<T, E = AdapterError> = std::result::Result<T, E>;

/// The slice an adapter works on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slice {
    /// The slice's name: safe for every server binky knows (lower-case letters, digits and
    /// `_`, at most 63 characters), unique per project, world and service.
    pub name: String,
    /// A password binky generated for this slice and keeps in its store (mode 0600).
    pub secret: String,
}

/// An adapter's configuration, from the service's table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdapterConfig {
    /// The shared server's admin address, tokens resolved; for a built-in adapter without
    /// one, the managed server's.
    pub admin_url: Option<String>,
    /// `options = { … }`, as written.
    pub options: BTreeMap<String, String>,
    /// `buckets = [ … ]`.
    pub buckets: Vec<String>,
    /// `admin_url` is a server binky runs for this slice alone (a world's own
    /// redis-server, see [`Adapter::server_per_slice`]): the slice is the whole server.
    pub own_server: bool,
    /// What binky's store recorded of the slices on the same server: their tokens, by
    /// slice name (this slice's too, once it was made). An adapter that numbers its slices
    /// per server (redis' databases) keeps the numbers stable and unique with it.
    pub recorded: BTreeMap<String, BTreeMap<String, String>>,
}

impl AdapterConfig {
    /// The admin URL, when one is given and not blank.
    pub fn admin(&self) -> Option<&str> {
        self.admin_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
    }

    /// The option `key`, when it is given and not empty.
    pub fn option(&self, key: &str) -> Option<&str> {
        self.options
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// `admin_url` when it is given and not empty, else the environment variable `var`
    /// (the adapter's [`AdapterKind::admin_url_env`]) when it is set and not empty.
    pub fn admin_url_or_env(&self, var: &str) -> Option<String> {
        self.admin_url
            .clone()
            .filter(|u| !u.is_empty())
            .or_else(|| std::env::var(var).ok().filter(|u| !u.is_empty()))
    }

    /// `admin_url` as given (an empty one is the adapter's to refuse), else the environment
    /// variable `var` when it is set and not blank; else a configuration error saying
    /// `missing`: what the adapter needs and where to give it.
    pub fn admin_url_else_env(&self, var: &str, missing: &str) -> Result<String> {
        match &self.admin_url {
            Some(url) => Ok(url.clone()),
            None => std::env::var(var)
                .ok()
                .filter(|u| !u.trim().is_empty())
                .ok_or_else(|| AdapterError::Config(missing.to_owned())),
        }
    }
}

/// The environment variable naming the server of a service of `adapter` (any of its names,
/// with or without a version) that has no `admin_url`: binky 0.1.2's, from
/// [`AdapterKind::admin_url_env`]. The daemon reads it (see `crate::slices`) and records the
/// value with the slice, so the slice is dropped where it was made even if the variable is
/// gone by then; adapters only ever see [`AdapterConfig::admin_url`].
pub fn admin_url_env(adapter: &str) -> Option<&'static str> {
    AdapterKind::of(adapter).and_then(AdapterKind::admin_url_env)
}

/// Every variable [`admin_url_env`] answers with.
pub fn admin_url_vars() -> impl Iterator<Item = &'static str> {
    AdapterKind::ALL
        .into_iter()
        .filter_map(AdapterKind::admin_url_env)
}

/// Where a slice is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address {
    /// What a service's client library takes as is (`${db.url}`), credentials included.
    pub url: String,
    /// Extra tokens (`${cache.prefix}`), by name.
    pub tokens: BTreeMap<String, String>,
}

impl Address {
    /// The address `url`, with `tokens` by name.
    pub fn new<const N: usize>(url: String, tokens: [(&str, String); N]) -> Address {
        Address {
            url,
            tokens: tokens
                .into_iter()
                .map(|(name, value)| (name.to_owned(), value))
                .collect(),
        }
    }
}

/// Which binky home made a slice, as its server records it (see [`Adapter::maker`]).
///
/// Each home has an identity (eight characters of `[a-z2-7]`, made once and kept in its
/// store); a slice's name carries it, and the server keeps a mark of it — a comment, a row
/// of a catalog, a tag: what the server keeps — so that any home sharing the server can
/// tell its own slices from another's. `remove`, `binky gc` and golden templates' drops
/// leave a slice another home's mark names (docs/shared-server.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Maker {
    /// The server records this home (its identity).
    Home(String),
    /// The slice is there with no home's mark: made before binky marked its slices (by
    /// this home or another), or its mark was lost.
    Unmarked,
    /// The slice is not on the server (nothing to mark).
    Absent,
    /// This adapter cannot tell (an external adapter; a slice that is a server of its own).
    Untold,
}

impl Maker {
    /// The other home this says made the slice, when it is not `home`.
    pub fn other_than(&self, home: &str) -> Option<&str> {
        match self {
            Maker::Home(h) if h != home => Some(h),
            _ => None,
        }
    }
}

/// How a mark that is text (a PostgreSQL comment, a RabbitMQ vhost's description, …) reads:
/// `binky slice` (made before marks named a home) or `binky slice of home <id>`.
pub mod mark {
    use super::Maker;

    /// What every binky mark begins with (and all a mark from before homes said).
    pub const PREFIX: &str = "binky slice";

    /// The mark of a slice `home` made.
    pub fn text(home: &str) -> String {
        format!("{PREFIX} of home {home}")
    }

    /// The maker a mark names; `None` when `text` is no binky mark.
    pub fn parse(text: &str) -> Option<Maker> {
        let rest = text.trim().strip_prefix(PREFIX)?;
        if rest.is_empty() {
            return Some(Maker::Unmarked);
        }
        let home = rest.strip_prefix(" of home ")?.trim();
        is_home_id(home).then(|| Maker::Home(home.to_owned()))
    }

    /// Is `id` a home's identity: eight characters of `[a-z2-7]`?
    pub fn is_home_id(id: &str) -> bool {
        id.len() == 8
            && id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b))
    }
}

/// What an adapter can do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// It can copy one slice into another server-side.
    pub clone: bool,
}

/// Why an adapter call failed.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    /// The server cannot be reached (or refused the admin credentials): worth retrying.
    #[error("cannot reach {server}: {detail}")]
    Unreachable {
        /// The server, without credentials (`postgres://127.0.0.1:5432`).
        server: String,
        /// What happened.
        detail: String,
    },
    /// The server answered with an error.
    #[error("{server}: {detail}")]
    Server {
        /// The server, without credentials.
        server: String,
        /// What it said.
        detail: String,
    },
    /// No built-in adapter and no external one by this name.
    #[error("no adapter `{name}`: not built in ({builtins}) and no `binky-adapter-{name}` on PATH; install it, or fix `adapter` in binky.toml")]
    NotFound {
        /// The name asked for.
        name: String,
        /// The built-in names.
        builtins: String,
    },
    /// An external adapter broke its protocol or failed.
    #[error("binky-adapter-{name} {verb}: {detail}")]
    External {
        /// Adapter name.
        name: String,
        /// The verb.
        verb: String,
        /// What went wrong.
        detail: String,
    },
    /// The configuration cannot work.
    #[error("{0}")]
    Config(String),
    /// Not supported by this adapter.
    #[error("adapter `{0}` cannot clone")]
    NoClone(String),
    /// The slice's server records another binky home as its maker: this home neither uses
    /// nor drops it.
    #[error("{server}: slice `{slice}` belongs to another binky home ({home}), which made or adopted it; this home neither uses nor drops it (a world of this home gets a slice of its own, named after this home, once it is removed and brought up again)")]
    OtherHome {
        /// The server, without credentials.
        server: String,
        /// The slice.
        slice: String,
        /// The other home's identity.
        home: String,
    },
}

impl AdapterError {
    /// Worth retrying with backoff (a server that is down may come back).
    pub fn transient(&self) -> bool {
        matches!(self, AdapterError::Unreachable { .. })
    }
}

/// One adapter. Adapters are used as `dyn Adapter` (one registry for built-in and external
/// ones), so the async methods are boxed by `async_trait`.
#[async_trait::async_trait]
pub trait Adapter: Send + Sync {
    /// The built-in adapter it is (its names, variable and the rest: [`AdapterKind`]);
    /// `None` for an external one.
    fn kind(&self) -> Option<AdapterKind>;
    /// The names it answers to (`["redis", "valkey"]`): its kind's; none for an external
    /// adapter, which is found by its executable's name.
    fn names(&self) -> &'static [&'static str] {
        self.kind().map_or(&[], AdapterKind::names)
    }
    /// What it can do; by default what its kind says (a server-side clone or not).
    async fn capabilities(&self, cfg: &AdapterConfig) -> Result<Capabilities> {
        let _ = cfg;
        Ok(Capabilities {
            clone: self.kind().is_some_and(AdapterKind::can_clone),
        })
    }
    /// Create the slice (and its own credentials) if it does not exist.
    async fn provision(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()>;
    /// The slice's address.
    async fn resolve(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Address>;
    /// Remove the slice and its credentials; nothing of it is left.
    async fn teardown(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()>;
    /// Names of the slices binky made on this server (those starting with `bk_`), for
    /// `binky gc`; adapters that cannot list return an empty list.
    async fn list(&self, cfg: &AdapterConfig) -> Result<Vec<String>> {
        let _ = cfg;
        Ok(Vec::new())
    }
    /// Copy `from` into a new `to`, server-side (only with `capabilities().clone`).
    async fn clone_slice(&self, from: &Slice, to: &Slice, cfg: &AdapterConfig) -> Result<()> {
        let _ = (from, to, cfg);
        let name = self.kind().map_or("external", AdapterKind::name);
        Err(AdapterError::NoClone(name.to_owned()))
    }
    /// Make a freshly migrated and seeded slice a template: closed to connections, owned
    /// so that copies can be handed to their own roles. Adapters without clone do nothing.
    async fn seal_template(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        let _ = (slice, cfg);
        Ok(())
    }
    /// Does a slice configured as `cfg` (its `admin_url` the one given in binky.toml or by
    /// its environment variable, if any) get a server of its own, which binky runs for it?
    /// An error when its options ask for one that cannot be had.
    fn server_per_slice(&self, cfg: &AdapterConfig) -> Result<bool> {
        let _ = cfg;
        Ok(false)
    }
    /// Which binky home the server records as the slice's maker (see [`Maker`]); by
    /// default [`Maker::Untold`]. Read before a slice is provisioned, cloned into or torn
    /// down, and by `binky gc`, so that no home touches another's slice.
    async fn maker(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Maker> {
        let _ = (slice, cfg);
        Ok(Maker::Untold)
    }
    /// Record `home` as the maker of the slice (made, or made before marks named a home:
    /// adopted), unless the server records another home: then nothing is written. The
    /// maker recorded now, so the caller sees which home won when two claim at once (where
    /// the server allows it, the claim is atomic). Called after `provision` and
    /// `clone_slice`; a teardown removes the mark with the slice. By default nothing is
    /// recorded: [`Maker::Untold`].
    async fn claim(&self, slice: &Slice, cfg: &AdapterConfig, home: &str) -> Result<Maker> {
        let _ = (slice, cfg, home);
        Ok(Maker::Untold)
    }
    /// Is the slice still on the server? `None`: this adapter cannot tell. Used to notice a
    /// slice dropped from outside binky, which is then provisioned (migrated, seeded) again.
    async fn exists(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Option<bool>> {
        let _ = (slice, cfg);
        Ok(None)
    }
}

/// The built-in adapters, one per [`AdapterKind`], and the fallback to external ones.
#[derive(Clone)]
pub struct Registry {
    builtins: Vec<Arc<dyn Adapter>>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            builtins: AdapterKind::ALL.into_iter().map(builtin).collect(),
        }
    }
}

/// The adapter that drives slices of `kind`.
fn builtin(kind: AdapterKind) -> Arc<dyn Adapter> {
    match kind {
        AdapterKind::Postgres => Arc::new(postgres::Postgres),
        AdapterKind::Redis => Arc::new(redis::Redis),
        AdapterKind::Mysql => Arc::new(mysql::Mysql),
        AdapterKind::Mongodb => Arc::new(mongodb::Mongo),
        AdapterKind::Clickhouse => Arc::new(clickhouse::ClickHouse),
        AdapterKind::S3 => Arc::new(s3::S3),
        AdapterKind::Rabbitmq => Arc::new(rabbitmq::RabbitMq),
        AdapterKind::Kafka => Arc::new(kafka::Kafka),
        AdapterKind::Qdrant => Arc::new(qdrant::Qdrant),
        AdapterKind::Elasticsearch => Arc::new(elasticsearch::Elasticsearch),
    }
}

impl Registry {
    /// The adapter for `name` (`name@version`, binky 0.1.2's form, is accepted: the version
    /// chooses nothing).
    pub fn get(&self, name: &str) -> Result<Arc<dyn Adapter>> {
        let read = kind::AdapterName::read(name);
        if let Some(kind) = read.kind {
            if let Some(a) = self.builtins.iter().find(|a| a.kind() == Some(kind)) {
                return Ok(a.clone());
            }
        }
        external::External::find(read.name)
            .map(|e| Arc::new(e) as Arc<dyn Adapter>)
            .ok_or_else(|| AdapterError::NotFound {
                name: read.name.to_owned(),
                builtins: self.builtin_names().join(", "),
            })
    }

    /// Is `name` (any of an adapter's names, with or without a version) a built-in adapter?
    pub fn is_builtin(&self, name: &str) -> bool {
        AdapterKind::of(name).is_some_and(|k| self.builtins.iter().any(|a| a.kind() == Some(k)))
    }

    /// Every built-in name.
    pub fn builtin_names(&self) -> Vec<&'static str> {
        self.builtins
            .iter()
            .flat_map(|a| a.names().iter().copied())
            .collect()
    }
}

/// `name` made to fit a server's limit: kept when it is at most `limit` bytes, else cut and
/// ended with `_` and 8 hex digits of its SHA-256, so two long names never collapse into
/// one. `name` is a slice name (`[a-z0-9_]`); callers map `_` to what their server allows.
pub fn fit_name(name: &str, limit: usize) -> String {
    use sha2::{Digest, Sha256};
    if name.len() <= limit {
        return name.to_owned();
    }
    let digest = Sha256::digest(name.as_bytes());
    let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let keep = limit.saturating_sub(9);
    let head = name[..keep.min(name.len())].trim_end_matches('_');
    format!("{head}_{hash}")
}

/// Removes secrets from text bound for an error message (a server's words may quote a
/// statement or a URL that holds one).
pub struct Scrub(Vec<String>);

impl Scrub {
    /// A scrubber for `secrets`; empty ones are left out.
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Scrub {
        // Very short strings would mangle every message and are no secret worth hiding.
        Scrub(
            secrets
                .into_iter()
                .filter(|s| s.len() >= 3)
                .map(str::to_owned)
                .collect(),
        )
    }

    /// `text` with every secret replaced by `***`.
    pub fn apply(&self, text: &str) -> String {
        self.0
            .iter()
            .fold(text.to_owned(), |t, s| t.replace(s.as_str(), "***"))
    }
}

/// `text` with each of `secrets` (at least 3 bytes long) replaced by `***`.
pub fn scrub<'a>(text: &str, secrets: impl IntoIterator<Item = &'a str>) -> String {
    Scrub::new(secrets).apply(text)
}

/// `text` with each of a server's `secrets` and the call's `extra` ones (a slice's) replaced
/// by `***`, as [`scrub`] does.
pub fn scrub_with(text: &str, secrets: &[String], extra: &[&str]) -> String {
    scrub(
        text,
        secrets
            .iter()
            .map(String::as_str)
            .chain(extra.iter().copied()),
    )
}

/// What an adapter logs when worlds on a server cannot get credentials of their own: its
/// name and what the worlds share instead. Said once per adapter, server and reason (see
/// [`SharedWarning::warn`]): said at every resolve, it would drown the log.
pub struct SharedWarning {
    /// The adapter's name.
    pub adapter: &'static str,
    /// What worlds on such a server share instead of credentials of their own.
    pub consequence: &'static str,
}

impl SharedWarning {
    /// Logs, the first time for this adapter, `server` and `why`, that worlds on `server`
    /// cannot get credentials of their own (`why`) and what they share instead.
    pub fn warn(&self, server: &str, why: &str) {
        static WARNED: std::sync::Mutex<std::collections::BTreeSet<String>> =
            std::sync::Mutex::new(std::collections::BTreeSet::new());
        let first = WARNED
            .lock()
            .map(|mut w| w.insert(format!("{} {server} {why}", self.adapter)))
            .unwrap_or(true);
        if first {
            tracing::warn!(%server, "{}: {why}; {}", self.adapter, self.consequence);
        }
    }
}

/// `verb`, given `limit` to answer: past it `server` counts as unreachable (worth retrying).
pub async fn bounded<T>(
    server: &str,
    limit: std::time::Duration,
    verb: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    tokio::time::timeout(limit, verb).await.unwrap_or_else(|_| {
        Err(AdapterError::Unreachable {
            server: server.to_owned(),
            detail: format!("no answer within {} s", limit.as_secs()),
        })
    })
}

/// Refuses a home identity that is not one ([`mark::is_home_id`]) before it reaches a
/// server (binky's own always are; a mark is written into statements and documents).
pub fn check_home(home: &str) -> Result<()> {
    if mark::is_home_id(home) {
        Ok(())
    } else {
        Err(AdapterError::Config(format!(
            "`{home}` is not a binky home's identity (eight characters of a-z and 2-7)"
        )))
    }
}

/// Refuses a slice name that is not `[a-z0-9_]+` before it reaches a server (binky's own
/// names always are; a name from elsewhere could carry a path or a quote).
pub fn check_plain_name(slice: &Slice) -> Result<()> {
    if is_plain_name(&slice.name) {
        Ok(())
    } else {
        Err(AdapterError::Config(format!(
            "slice name `{}` is not [a-z0-9_]+",
            slice.name
        )))
    }
}

/// `first`, then each of an error's sources that says something new (`dispatch failure:
/// io error: … Connection refused`): the words of every layer, each once, without the
/// Debug dumps some clients' own displays add.
pub fn with_sources(first: String, source: Option<&(dyn std::error::Error + 'static)>) -> String {
    let mut out = first;
    let mut source = source;
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// An error and its sources, each said once (see [`with_sources`]).
pub fn error_chain(err: &dyn std::error::Error) -> String {
    with_sources(err.to_string(), err.source())
}

/// Is `name` `[a-z0-9_]+`: a name every server takes as it is, with nothing to quote?
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// `postgres://user:pw@host:5432/db` → `postgres://host:5432` (for messages: never show a
/// credential); `postgres://u:pw@host:5432/db?x` → `postgres://host:5432/db?x` (the address
/// to show). Both come from the one URL reader, [`binky_controllers::url`].
pub use binky_controllers::url::{redact_server as redact, without_credentials};

/// Whether a built-in adapter (any of its names, with or without a version) can clone,
/// known without asking a server; `None` for an external adapter (its `capabilities` verb
/// says).
pub fn can_clone_statically(name: &str) -> Option<bool> {
    AdapterKind::of(name).map(AdapterKind::can_clone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_fit_and_stay_distinct() {
        assert_eq!(fit_name("bk_a_b_db", 32), "bk_a_b_db");
        let a = fit_name(&format!("bk_{}_x_db", "p".repeat(40)), 32);
        let b = fit_name(&format!("bk_{}_y_db", "p".repeat(40)), 32);
        assert_eq!(a.len(), 32, "{a}");
        assert_ne!(a, b);
        assert_eq!(a, fit_name(&format!("bk_{}_x_db", "p".repeat(40)), 32));
    }

    #[test]
    fn marks_name_their_home_and_a_mark_from_before_homes_names_none() {
        assert_eq!(
            mark::parse(&mark::text("h2k4m6p7")),
            Some(Maker::Home("h2k4m6p7".into()))
        );
        assert_eq!(mark::parse("binky slice"), Some(Maker::Unmarked));
        for not_ours in [
            "",
            "my database",
            "binky slice of home",
            "binky slice of home X1",
        ] {
            assert_eq!(mark::parse(not_ours), None, "{not_ours}");
        }
        let theirs = Maker::Home("a3b5c7d2".into());
        assert_eq!(theirs.other_than("h2k4m6p7"), Some("a3b5c7d2"));
        assert_eq!(theirs.other_than("a3b5c7d2"), None);
        assert_eq!(Maker::Unmarked.other_than("h2k4m6p7"), None);
    }

    #[test]
    fn credentials_never_reach_a_message() {
        assert_eq!(
            redact("postgres://admin:s3cret@127.0.0.1:5432/postgres"),
            "postgres://127.0.0.1:5432"
        );
        assert_eq!(redact("redis://:pw@h:6379/0"), "redis://h:6379");
        assert_eq!(redact("redis://h:6379"), "redis://h:6379");
        assert_eq!(
            without_credentials("postgres://u:pw@127.0.0.1:5432/bk_x?sslmode=disable"),
            "postgres://127.0.0.1:5432/bk_x?sslmode=disable"
        );
    }
}
