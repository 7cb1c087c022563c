//! The tokens a slice gives (`${db.host}`, `${cache.db}`, …) besides its `${svc.url}`, for
//! every adapter: one list per built-in adapter, which `binky check` holds a config to, and
//! the completion that makes every slice's address give at least the common ones.
//!
//! # Guarantees
//! - Every adapter's slice gives [`COMMON`]: `host`, `port`, `user`, `password`,
//!   `database` and `name` (the same value: a database, a vhost, a bucket, a collection or
//!   a prefix — whatever the slice is). `user` and `password` are empty where the server
//!   takes none.
//! - A built-in adapter's slice gives exactly [`documented`]'s list (tested for each
//!   adapter and setting, and against the table in docs/adapters.md).
//! - What the adapter itself says wins: completion only fills a token that is missing.

use std::collections::BTreeMap;

use binky_controllers::url::{self, Url};

use super::Address;

/// The tokens every adapter gives.
pub const COMMON: [&str; 6] = ["host", "port", "user", "password", "database", "name"];

/// The canonical family of a built-in adapter name (`postgresql` → `postgres`); `None` for
/// an external adapter.
pub fn family(adapter: &str) -> Option<&'static str> {
    Some(match adapter.split('@').next().unwrap_or(adapter) {
        "postgres" | "postgresql" => "postgres",
        "redis" | "valkey" => "redis",
        "mysql" | "mariadb" | "percona" => "mysql",
        "mongodb" => "mongodb",
        "clickhouse" => "clickhouse",
        "s3" | "minio" => "s3",
        "rabbitmq" => "rabbitmq",
        "kafka" | "redpanda" => "kafka",
        "qdrant" => "qdrant",
        "elasticsearch" | "opensearch" => "elasticsearch",
        _ => return None,
    })
}

/// A built-in adapter's own tokens, beyond [`COMMON`] and `url`.
fn own(family: &str) -> &'static [&'static str] {
    match family {
        "redis" => &["db", "prefix"],
        "s3" => &[
            "bucket",
            "prefix",
            "endpoint",
            "region",
            "access_key_id",
            "secret_access_key",
        ],
        "rabbitmq" => &["vhost", "management_url"],
        "kafka" => &["prefix", "bootstrap", "topics"],
        "qdrant" => &["collection", "endpoint", "api_key"],
        "elasticsearch" => &["prefix", "endpoint"],
        _ => &[],
    }
}

/// Every token a built-in adapter's slice gives besides `url` (and `proxy_url`, which is
/// its `url`), sorted; `None` for an external adapter (its `resolve` answer says).
pub fn documented(adapter: &str) -> Option<Vec<&'static str>> {
    let family = family(adapter)?;
    let mut all: Vec<&'static str> = COMMON.iter().chain(own(family)).copied().collect();
    all.sort_unstable();
    all.dedup();
    Some(all)
}

/// The default port of a URL scheme, where one is known.
fn default_port(scheme: &str) -> Option<u16> {
    Some(match scheme.to_ascii_lowercase().as_str() {
        "postgres" | "postgresql" => 5432,
        "redis" => 6379,
        "rediss" => 6380,
        "mysql" | "mariadb" => 3306,
        "mongodb" => 27017,
        "amqp" => 5672,
        "amqps" => 5671,
        "kafka" => 9092,
        "http" => 80,
        "https" => 443,
        _ => return None,
    })
}

/// `address` with every token of [`COMMON`] (and redis' `db`) it lacks, taken from what it
/// has: the server from its `endpoint` or `bootstrap` token when it has one (an S3 URL names
/// a bucket, not a server), else from its URL; the credentials from the URL (or S3's keys,
/// Qdrant's API key); the namespace from the adapter's own word for it, else the URL's path.
pub fn complete(adapter: &str, mut address: Address) -> Address {
    let family = family(adapter);
    let t = &mut address.tokens;
    let server_text = t
        .get("endpoint")
        .cloned()
        .or_else(|| {
            t.get("bootstrap")
                .map(|b| format!("kafka://{}", b.split(',').next().unwrap_or("")))
        })
        .unwrap_or_else(|| address.url.clone());
    let server = Url::parse(&server_text);
    let own_url = Url::parse(&address.url);
    let fill = |t: &mut BTreeMap<String, String>, k: &str, v: Option<String>| {
        if !t.contains_key(k) {
            t.insert(k.to_owned(), v.unwrap_or_default());
        }
    };
    if let Some(u) = server {
        // The first of a list (`mongodb://h1:27017,h2:27017`).
        let first = u.host.split(',').next().unwrap_or("");
        let (host, port) = url::host_port(first).unwrap_or((first, None));
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port = port
            .and_then(|p| p.parse::<u16>().ok())
            .or_else(|| default_port(u.scheme));
        fill(t, "host", Some(host.to_owned()));
        fill(t, "port", port.map(|p| p.to_string()));
    }
    // Credentials: what the adapter says, else its keys, else the URL's user info.
    let from_url = server.or(own_url);
    let key_id = t.get("access_key_id").cloned();
    let secret_key = t.get("secret_access_key").or(t.get("api_key")).cloned();
    fill(
        t,
        "user",
        key_id.or_else(|| from_url.and_then(|u| u.user()).map(url::percent_decode)),
    );
    fill(
        t,
        "password",
        secret_key.or_else(|| from_url.and_then(|u| u.password()).map(url::percent_decode)),
    );
    let namespace = ["database", "vhost", "bucket", "collection", "prefix"]
        .iter()
        .find_map(|k| t.get(*k).filter(|v| !v.is_empty()).cloned())
        .or_else(|| {
            own_url.map(|u| {
                let path = u.path().trim_start_matches('/');
                url::percent_decode(path.split('/').next().unwrap_or(""))
            })
        });
    fill(t, "database", namespace);
    let database = t.get("database").cloned();
    fill(t, "name", database.clone());
    if family == Some("redis") {
        fill(t, "db", database);
    }
    address
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_external_adapters_address_gets_the_common_tokens_from_its_url() {
        let a = complete(
            "files",
            Address {
                url: "files://me:p%40ss@store.local:7000/bk_a_w_files?x=1".into(),
                tokens: BTreeMap::from([("root".into(), "/srv".into())]),
            },
        );
        assert_eq!(a.tokens["host"], "store.local");
        assert_eq!(a.tokens["port"], "7000");
        assert_eq!(a.tokens["user"], "me");
        assert_eq!(a.tokens["password"], "p@ss");
        assert_eq!(a.tokens["database"], "bk_a_w_files");
        assert_eq!(a.tokens["name"], "bk_a_w_files");
        assert_eq!(a.tokens["root"], "/srv");
        assert!(documented("files").is_none());
    }

    #[test]
    fn what_the_adapter_says_wins_and_a_missing_port_is_the_schemes() {
        let a = complete(
            "postgres",
            Address {
                url: "postgres://u:p@[::1]/x".into(),
                tokens: BTreeMap::from([("database".into(), "own".into())]),
            },
        );
        assert_eq!(a.tokens["host"], "::1");
        assert_eq!(a.tokens["port"], "5432");
        assert_eq!(a.tokens["database"], "own");
        assert_eq!(a.tokens["name"], "own");
    }

    use crate::adapters::{Adapter, AdapterConfig, Slice};

    fn cfg(url: &str, options: &[(&str, &str)]) -> AdapterConfig {
        AdapterConfig {
            admin_url: Some(url.to_owned()),
            options: options
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..AdapterConfig::default()
        }
    }

    /// Every adapter whose `resolve` needs no server, in each setting that changes its
    /// address: after completion its slice gives exactly the documented tokens, none of
    /// them empty but where the server takes no such thing.
    #[test]
    fn every_documented_token_resolves_for_every_adapter_and_setting() {
        let slice = Slice {
            name: "bk_acme_w_svc".into(),
            secret: "s3cr3t".into(),
        };
        let mut recorded = cfg("redis://default:pw@127.0.0.1:6379/0", &[]);
        recorded.recorded.insert(
            slice.name.clone(),
            BTreeMap::from([("database".to_owned(), "4".to_owned())]),
        );
        let own_redis = AdapterConfig {
            own_server: true,
            ..cfg("redis://default:s3cr3t@127.0.0.1:40001", &[])
        };
        /// (adapter name, the adapter, its config, tokens that may be empty).
        type Case = (
            &'static str,
            Box<dyn Adapter>,
            AdapterConfig,
            &'static [&'static str],
        );
        let cases: Vec<Case> = vec![
            (
                "postgres",
                Box::new(crate::adapters::postgres::Postgres),
                cfg(
                    "postgres://admin:pw@db.local:6543/postgres?sslmode=disable",
                    &[],
                ),
                &[],
            ),
            (
                "postgresql",
                Box::new(crate::adapters::postgres::Postgres),
                cfg("postgresql://admin:pw@[::1]/postgres", &[]),
                &[],
            ),
            (
                "mysql",
                Box::new(crate::adapters::mysql::Mysql),
                cfg("mysql://root:pw@db.local:3307", &[]),
                &[],
            ),
            (
                "mariadb",
                Box::new(crate::adapters::mysql::Mysql),
                cfg("mariadb://root:pw@db.local", &[]),
                &[],
            ),
            (
                "mongodb",
                Box::new(crate::adapters::mongodb::Mongo),
                cfg("mongodb://admin:pw@h1:27018,h2/?replicaSet=rs0", &[]),
                &[],
            ),
            (
                "redis",
                Box::new(crate::adapters::redis::Redis),
                own_redis,
                &["prefix"],
            ),
            (
                "redis",
                Box::new(crate::adapters::redis::Redis),
                recorded,
                &["prefix"],
            ),
            (
                "valkey",
                Box::new(crate::adapters::redis::Redis),
                cfg("redis://default:pw@h:7000/2", &[("isolation", "prefix")]),
                &[],
            ),
            (
                "s3",
                Box::new(crate::adapters::s3::S3),
                cfg("http://KEY:SECRET@minio.local:9000", &[]),
                &["prefix"],
            ),
            (
                "minio",
                Box::new(crate::adapters::s3::S3),
                cfg("https://KEY:SECRET@s3.example", &[("bucket", "shared")]),
                &[],
            ),
            (
                "rabbitmq",
                Box::new(crate::adapters::rabbitmq::RabbitMq),
                cfg("http://admin:pw@mq.local:15672", &[]),
                &[],
            ),
            (
                "kafka",
                Box::new(crate::adapters::kafka::Kafka),
                cfg("kafka://b1:9093,b2", &[("topics", "orders")]),
                &["user", "password"],
            ),
            (
                "redpanda",
                Box::new(crate::adapters::kafka::Kafka),
                cfg("kafka://b1", &[]),
                &["user", "password", "topics"],
            ),
        ];
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        for (name, adapter, c, may_be_empty) in cases {
            let a = rt
                .block_on(adapter.resolve(&slice, &c))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let a = complete(name, a);
            let got: Vec<&str> = a.tokens.keys().map(String::as_str).collect();
            assert_eq!(got, documented(name).unwrap(), "{name} {c:?}");
            for (k, v) in &a.tokens {
                assert!(
                    !v.is_empty() || may_be_empty.contains(&k.as_str()),
                    "{name}: `{k}` is empty ({c:?})"
                );
            }
            // The server's port is a number, its host is no URL.
            assert!(
                a.tokens["port"].parse::<u16>().is_ok(),
                "{name}: {:?}",
                a.tokens
            );
            assert!(!a.tokens["host"].contains('/'), "{name}: {:?}", a.tokens);
            assert_eq!(a.tokens["name"], a.tokens["database"], "{name}");
            // No admin credential in any token.
            assert!(
                !a.tokens.values().any(|v| v == "pw"),
                "{name}: {:?}",
                a.tokens
            );
        }
    }

    #[test]
    fn the_table_in_docs_lists_exactly_each_adapters_tokens() {
        let doc = include_str!("../../docs/adapters.md");
        let start = doc
            .find("| adapter | `${svc.url}` | tokens |")
            .expect("the table");
        let mut rows = 0;
        for line in doc[start..].lines().skip(2) {
            if !line.starts_with('|') {
                break;
            }
            let cells: Vec<&str> = line.split(" | ").collect();
            let adapter = cells[0].trim_start_matches("| ").trim();
            let listed: Vec<&str> = cells[cells.len() - 1]
                .trim_end_matches(" |")
                .split(", ")
                .map(|t| t.trim_matches('`'))
                .collect();
            assert_eq!(listed, documented(adapter).unwrap(), "{adapter}");
            rows += 1;
        }
        assert_eq!(rows, 10);
    }
}
