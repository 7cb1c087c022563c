//! What each built-in adapter is, stated once: its names, how `adapter = "name@version"`
//! reads, the environment variable naming its server, its tokens, whether it clones, and
//! the server binky runs for it. Every other part of binky asks [`AdapterKind`].
//!
//! # Guarantees
//! - Every name of an adapter answers every question exactly as its canonical name does,
//!   with or without a version (tested over every name and every question, and against the
//!   names docs/adapters.md and the README list).
//! - [`AdapterName::read`] is the only place an adapter's name is split from its version;
//!   [`AdapterName::parse`] is the same reading with the errors `binky.toml` gets for a
//!   value that can name no adapter.
//! - This module imports nothing of binky's: config, check, servers and the adapters all
//!   ask it, and none of them is asked back.

/// A built-in adapter: one family of servers sliced the same way (`redis` and `valkey` are
/// one), whatever name `binky.toml` gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AdapterKind {
    /// PostgreSQL.
    Postgres,
    /// Redis and Valkey.
    Redis,
    /// MySQL, MariaDB and Percona.
    Mysql,
    /// MongoDB.
    Mongodb,
    /// ClickHouse.
    Clickhouse,
    /// S3 and MinIO.
    S3,
    /// RabbitMQ.
    Rabbitmq,
    /// Kafka and Redpanda.
    Kafka,
    /// Qdrant.
    Qdrant,
    /// Elasticsearch and OpenSearch.
    Elasticsearch,
}

/// The servers binky can run itself, for the adapters that have one
/// ([`Descriptor::server`]); `crate::servers` runs them (as `servers::Kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ServerKind {
    /// PostgreSQL.
    Postgres,
    /// Redis (or Valkey).
    Redis,
    /// MariaDB, for the MySQL-family adapters (`mysql`, `mariadb`, `percona`).
    Mysql,
}

/// What a built-in adapter is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptor {
    /// The names `adapter = "…"` takes for it: the canonical one first (`redis`, the name
    /// binky uses for it in messages, docs and tokens' tables), then the others (`valkey`).
    pub names: &'static [&'static str],
    /// binky 0.1.2's environment variable naming the server of a service without
    /// `admin_url` (`BINKY_DB_ADMIN_URL`), read from the daemon's environment.
    pub admin_url_env: Option<&'static str>,
    /// The server binky runs itself for a service with neither `admin_url` nor the variable.
    pub server: Option<ServerKind>,
    /// It copies a golden template into a world's slice inside the server (`clone_from`).
    pub clone: bool,
    /// The tokens its slice gives besides `url` and the ones every adapter gives
    /// (`crate::adapters::tokens::COMMON`).
    pub tokens: &'static [&'static str],
}

impl AdapterKind {
    /// Every built-in adapter, in the order of the enum.
    pub const ALL: [AdapterKind; 10] = [
        AdapterKind::Postgres,
        AdapterKind::Redis,
        AdapterKind::Mysql,
        AdapterKind::Mongodb,
        AdapterKind::Clickhouse,
        AdapterKind::S3,
        AdapterKind::Rabbitmq,
        AdapterKind::Kafka,
        AdapterKind::Qdrant,
        AdapterKind::Elasticsearch,
    ];

    /// The table: what each built-in adapter is.
    pub const fn descriptor(self) -> Descriptor {
        match self {
            AdapterKind::Postgres => Descriptor {
                names: &["postgres", "postgresql"],
                admin_url_env: Some("BINKY_DB_ADMIN_URL"),
                server: Some(ServerKind::Postgres),
                clone: true,
                tokens: &[],
            },
            AdapterKind::Redis => Descriptor {
                names: &["redis", "valkey"],
                admin_url_env: Some("BINKY_REDIS_URL"),
                server: Some(ServerKind::Redis),
                clone: false,
                tokens: &["db", "prefix"],
            },
            AdapterKind::Mysql => Descriptor {
                names: &["mysql", "mariadb", "percona"],
                admin_url_env: Some("BINKY_MYSQL_URL"),
                server: Some(ServerKind::Mysql),
                clone: true,
                tokens: &[],
            },
            AdapterKind::Mongodb => Descriptor {
                names: &["mongodb"],
                admin_url_env: Some("BINKY_MONGO_URL"),
                server: None,
                clone: true,
                tokens: &[],
            },
            AdapterKind::Clickhouse => Descriptor {
                names: &["clickhouse"],
                admin_url_env: Some("BINKY_CLICKHOUSE_URL"),
                server: None,
                clone: false,
                tokens: &[],
            },
            // S3 takes the AWS SDK's own variables (`crate::adapters::s3::settings`).
            AdapterKind::S3 => Descriptor {
                names: &["s3", "minio"],
                admin_url_env: None,
                server: None,
                clone: false,
                tokens: &[
                    "bucket",
                    "prefix",
                    "endpoint",
                    "region",
                    "access_key_id",
                    "secret_access_key",
                ],
            },
            AdapterKind::Rabbitmq => Descriptor {
                names: &["rabbitmq"],
                admin_url_env: Some("BINKY_RABBITMQ_URL"),
                server: None,
                clone: false,
                tokens: &["vhost", "management_url"],
            },
            AdapterKind::Kafka => Descriptor {
                names: &["kafka", "redpanda"],
                admin_url_env: Some("BINKY_KAFKA_URL"),
                server: None,
                clone: false,
                tokens: &["prefix", "bootstrap", "topics"],
            },
            AdapterKind::Qdrant => Descriptor {
                names: &["qdrant"],
                admin_url_env: Some("BINKY_QDRANT_URL"),
                server: None,
                clone: false,
                tokens: &["collection", "endpoint", "api_key"],
            },
            AdapterKind::Elasticsearch => Descriptor {
                names: &["elasticsearch", "opensearch"],
                admin_url_env: Some("BINKY_ELASTICSEARCH_URL"),
                server: None,
                clone: false,
                tokens: &["prefix", "endpoint"],
            },
        }
    }

    /// The built-in adapter `adapter` names (`valkey`, `postgres@16`), if it is one.
    pub fn of(adapter: &str) -> Option<AdapterKind> {
        AdapterName::read(adapter).kind
    }

    /// The built-in adapter called exactly `name` (no version), if any.
    pub fn named(name: &str) -> Option<AdapterKind> {
        Self::ALL
            .into_iter()
            .find(|k| k.descriptor().names.contains(&name))
    }

    /// Its canonical name (`redis` for `valkey` too).
    pub const fn name(self) -> &'static str {
        self.descriptor().names[0]
    }

    /// Every name it takes, the canonical one first.
    pub const fn names(self) -> &'static [&'static str] {
        self.descriptor().names
    }

    /// binky 0.1.2's variable naming its server (see [`Descriptor::admin_url_env`]).
    pub const fn admin_url_env(self) -> Option<&'static str> {
        self.descriptor().admin_url_env
    }

    /// The variable of an adapter that has one, for the adapter's own `ENV_URL` constant:
    /// evaluated as a constant, an adapter without one fails to build rather than to run.
    pub const fn env_var(self) -> &'static str {
        match self.descriptor().admin_url_env {
            Some(var) => var,
            None => panic!("this adapter takes no admin-URL variable"),
        }
    }

    /// The server binky runs for it, if it runs one.
    pub const fn server(self) -> Option<ServerKind> {
        self.descriptor().server
    }

    /// It clones a golden template server-side.
    pub const fn can_clone(self) -> bool {
        self.descriptor().clone
    }

    /// Its slice's own tokens (see [`Descriptor::tokens`]).
    pub const fn tokens(self) -> &'static [&'static str] {
        self.descriptor().tokens
    }

    /// Every built-in name, each adapter's canonical name first.
    pub fn all_names() -> Vec<&'static str> {
        Self::ALL
            .iter()
            .flat_map(|k| k.names().iter().copied())
            .collect()
    }
}

impl ServerKind {
    /// Every kind of server binky runs.
    pub const ALL: [ServerKind; 3] = [ServerKind::Postgres, ServerKind::Redis, ServerKind::Mysql];

    /// Its name in the store and in paths.
    pub const fn as_str(self) -> &'static str {
        match self {
            ServerKind::Postgres => "postgres",
            ServerKind::Redis => "redis",
            ServerKind::Mysql => "mysql",
        }
    }

    /// The adapter it serves.
    pub const fn adapter(self) -> AdapterKind {
        match self {
            ServerKind::Postgres => AdapterKind::Postgres,
            ServerKind::Redis => AdapterKind::Redis,
            ServerKind::Mysql => AdapterKind::Mysql,
        }
    }

    /// A stored name, or any name of an adapter it serves (`binky servers stop valkey`).
    pub fn parse(s: &str) -> Option<ServerKind> {
        AdapterKind::named(s).and_then(AdapterKind::server)
    }

    /// The names [`ServerKind::parse`] takes for each kind, for a message listing them:
    /// `postgres (also postgresql), …`.
    pub fn choices() -> String {
        Self::ALL
            .iter()
            .map(|s| {
                let others: Vec<&str> = AdapterKind::ALL
                    .iter()
                    .filter(|k| k.server() == Some(*s))
                    .flat_map(|k| k.names().iter().copied())
                    .filter(|n| *n != s.as_str())
                    .collect();
                if others.is_empty() {
                    s.as_str().to_owned()
                } else {
                    format!("{} (also {})", s.as_str(), others.join(", "))
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The longest name an external adapter can have (its executable is `binky-adapter-<name>`).
const MAX_NAME: usize = 64;
/// The longest version binky takes (one is written like an image tag, whose limit this is).
const MAX_VERSION: usize = 128;

/// An `adapter = "…"` value, read: `postgres@16` is the adapter `postgres`, version `16`
/// (binky 0.1.2's form; the version is kept as written and chooses nothing: the server is
/// the one `admin_url` names, or binky's own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdapterName<'a> {
    /// The adapter's name, as written (`valkey`).
    pub name: &'a str,
    /// What follows the first `@`, if there is one.
    pub version: Option<&'a str>,
    /// The built-in adapter the name is, if it is one; else it names an external adapter,
    /// `binky-adapter-<name>`.
    pub kind: Option<AdapterKind>,
}

impl<'a> AdapterName<'a> {
    /// The name before the first `@`, and what follows it, as binky 0.1.2 read it. Never
    /// fails: a value `binky.toml` gives is checked by [`AdapterName::parse`] before it is
    /// stored; this reads what the store holds (a world written by an older binky too).
    pub fn read(text: &'a str) -> AdapterName<'a> {
        let (name, version) = match text.split_once('@') {
            Some((name, version)) => (name, Some(version)),
            None => (text, None),
        };
        AdapterName {
            name,
            version,
            kind: AdapterKind::named(name),
        }
    }

    /// The name binky stores and compares for this adapter: a built-in adapter's own name
    /// whichever of its names was written (`postgres` for `postgresql`), with the version as
    /// written; an external adapter's name as written. The slice controller and the golden
    /// template's key compare this text, so two spellings of one adapter are one adapter.
    pub fn canonical(&self) -> String {
        let name: &str = self.kind.map_or(self.name, |k| k.name());
        match self.version {
            Some(v) => format!("{name}@{v}"),
            None => name.to_owned(),
        }
    }

    /// `text` read as [`AdapterName::read`] does, refused when it can name no adapter: no
    /// name before `@`, an empty version or one that is not written like a version, or a
    /// name that is neither built in nor one an external adapter can have. A name that is
    /// well formed but not installed is not refused here: an external adapter may be
    /// installed after `binky.toml` is written.
    pub fn parse(text: &'a str) -> Result<AdapterName<'a>, NameError> {
        let read = AdapterName::read(text);
        if read.name.is_empty() {
            return Err(NameError::NoName {
                text: text.to_owned(),
            });
        }
        if read.kind.is_none() && !is_external_name(read.name) {
            return Err(NameError::BadName {
                name: read.name.to_owned(),
            });
        }
        match read.version {
            Some("") => Err(NameError::EmptyVersion {
                name: read.name.to_owned(),
            }),
            Some(v) if !is_version(v) => Err(NameError::BadVersion {
                name: read.name.to_owned(),
                version: v.to_owned(),
            }),
            _ => Ok(read),
        }
    }
}

/// Can `name` be an external adapter's (`binky-adapter-<name>` on `PATH`)? Lower-case
/// letters, digits, `_` and `-`, at most 64: nothing that could reach outside the `PATH`
/// directories or differ between file systems.
pub fn is_external_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Is `v` written like a version (as an image tag is: `16`, `8.0`, `7.2-alpine`)?
fn is_version(v: &str) -> bool {
    v.len() <= MAX_VERSION
        && v.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// Why an `adapter = "…"` value names no adapter.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Nothing before the `@`.
    #[error("`{text}` names no adapter before `@`")]
    NoName {
        /// The value.
        text: String,
    },
    /// Not built in, and no external adapter can be called so.
    #[error("no adapter `{name}`: it is not built in, and an external adapter's name (binky-adapter-NAME) is lower-case letters, digits, `_` and `-`, at most 64")]
    BadName {
        /// The name.
        name: String,
    },
    /// `name@` with nothing after it.
    #[error("`{name}@` has no version after `@`")]
    EmptyVersion {
        /// The adapter's name.
        name: String,
    },
    /// A version that is not written like one.
    #[error("`{version}` (after `{name}@`) is not a version: a version is letters, digits, `.`, `_` and `-`, starting with a letter or digit")]
    BadVersion {
        /// The adapter's name.
        name: String,
        /// What followed the `@`.
        version: String,
    },
}

impl NameError {
    /// How to write the value instead; `near` is, for a name that is no adapter's, the
    /// built-in name it looks like a misspelling of.
    pub fn fix(&self, near: Option<&str>) -> String {
        match (self, near) {
            (NameError::BadName { .. }, Some(near)) => {
                format!("did you mean adapter = \"{near}\"?")
            }
            (NameError::NoName { .. } | NameError::BadName { .. }, _) => format!(
                "use a built-in adapter ({}), or the name of an external one (binky-adapter-NAME on PATH)",
                AdapterKind::all_names().join(", ")
            ),
            (NameError::EmptyVersion { name } | NameError::BadVersion { name, .. }, _) => format!(
                "write adapter = \"{name}\", or with a version, adapter = \"{name}@16\" (binky chooses no server by it)"
            ),
        }
    }
}

#[cfg(test)]
mod tests;
