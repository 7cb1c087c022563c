//! The tokens a slice gives (`${db.host}`, `${cache.db}`, …) besides its `${svc.url}`, for
//! every adapter: one list per built-in adapter (the common tokens and its descriptor's own,
//! [`AdapterKind::tokens`]), which `binky check` holds a config to, and the completion that
//! makes every slice's address give at least the common ones.
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

use super::{AdapterKind, Address};

/// The tokens every adapter gives.
pub const COMMON: [&str; 6] = ["host", "port", "user", "password", "database", "name"];

/// Every token a built-in adapter's slice gives besides `url` (and `proxy_url`, which is
/// its `url`), sorted; `None` for an external adapter (its `resolve` answer says).
pub fn documented(adapter: &str) -> Option<Vec<&'static str>> {
    let kind = AdapterKind::of(adapter)?;
    let mut all: Vec<&'static str> = COMMON.iter().chain(kind.tokens()).copied().collect();
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
    let kind = AdapterKind::of(adapter);
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
    if kind == Some(AdapterKind::Redis) {
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

    use crate::adapters::kafka::Kafka;
    use crate::adapters::mongodb::Mongo;
    use crate::adapters::mysql::Mysql;
    use crate::adapters::postgres::Postgres;
    use crate::adapters::qdrant::Qdrant;
    use crate::adapters::rabbitmq::RabbitMq;
    use crate::adapters::redis::Redis;
    use crate::adapters::s3::S3;
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

    /// The adapter, the configuration the daemon would hand it, and the tokens that may be
    /// empty in this setting.
    type Resolves = (&'static dyn Adapter, AdapterConfig, &'static [&'static str]);

    /// One way a world's adapter service can be set up: its adapter name, what binky.toml
    /// says of it beyond `adapter`, and, where the adapter's `resolve` needs no server, the
    /// adapter with the configuration the daemon would hand it and the tokens that may be
    /// empty in this setting.
    struct Setting {
        adapter: &'static str,
        toml: &'static str,
        resolves: Option<Resolves>,
    }

    const SLICE: &str = "bk_acme_w_db";

    /// Every built-in adapter name, in each setting that changes its address (Redis: a
    /// server of the world's own, a database of a shared one, a prefix; S3 with and without
    /// a shared bucket; Kafka with and without topics). ClickHouse and Elasticsearch ask
    /// their server who the slice is, so only `check`'s side is generated for them.
    fn settings() -> Vec<Setting> {
        let admin = "admin_url = \"${env.ADMIN_URL}\"";
        let mut recorded = cfg("redis://default:pw@127.0.0.1:6379/0", &[]);
        recorded.recorded.insert(
            SLICE.to_owned(),
            BTreeMap::from([("database".to_owned(), "4".to_owned())]),
        );
        let own_redis = AdapterConfig {
            own_server: true,
            ..cfg("redis://default:s3cr3t@127.0.0.1:40001", &[])
        };
        let s = |adapter, toml, resolves| Setting {
            adapter,
            toml,
            resolves,
        };
        vec![
            s(
                "postgres",
                "",
                Some((
                    &Postgres,
                    cfg(
                        "postgres://admin:pw@db.local:6543/postgres?sslmode=disable",
                        &[],
                    ),
                    &[],
                )),
            ),
            s(
                "postgresql",
                admin,
                Some((
                    &Postgres,
                    cfg("postgresql://admin:pw@[::1]/postgres", &[]),
                    &[],
                )),
            ),
            s(
                "mysql",
                admin,
                Some((&Mysql, cfg("mysql://root:pw@db.local:3307", &[]), &[])),
            ),
            s(
                "mariadb",
                "",
                Some((&Mysql, cfg("mariadb://root:pw@db.local", &[]), &[])),
            ),
            s(
                "percona",
                admin,
                Some((&Mysql, cfg("mysql://root:pw@db.local", &[]), &[])),
            ),
            s(
                "mongodb",
                admin,
                Some((
                    &Mongo,
                    cfg("mongodb://admin:pw@h1:27018,h2/?replicaSet=rs0", &[]),
                    &[],
                )),
            ),
            s("redis", "", Some((&Redis, own_redis, &["prefix"]))),
            s("redis", admin, Some((&Redis, recorded, &["prefix"]))),
            s(
                "valkey",
                "admin_url = \"${env.ADMIN_URL}\"\noptions = { isolation = \"prefix\" }",
                Some((
                    &Redis,
                    cfg("redis://default:pw@h:7000/2", &[("isolation", "prefix")]),
                    &[],
                )),
            ),
            s(
                "s3",
                admin,
                Some((
                    &S3,
                    cfg("http://KEY:SECRET@minio.local:9000", &[]),
                    &["prefix"],
                )),
            ),
            s(
                "minio",
                "admin_url = \"${env.ADMIN_URL}\"\noptions = { bucket = \"shared\" }",
                Some((
                    &S3,
                    cfg("https://KEY:SECRET@s3.example", &[("bucket", "shared")]),
                    &[],
                )),
            ),
            s(
                "rabbitmq",
                admin,
                Some((&RabbitMq, cfg("http://admin:pw@mq.local:15672", &[]), &[])),
            ),
            s(
                "kafka",
                "admin_url = \"${env.ADMIN_URL}\"\noptions = { topics = \"orders\" }",
                Some((
                    &Kafka,
                    cfg("kafka://b1:9093,b2", &[("topics", "orders")]),
                    &["user", "password"],
                )),
            ),
            s(
                "redpanda",
                admin,
                Some((
                    &Kafka,
                    cfg("kafka://b1", &[]),
                    &["user", "password", "topics"],
                )),
            ),
            s(
                "qdrant",
                admin,
                Some((
                    &Qdrant,
                    cfg("http://qdrant.local:6333", &[]),
                    &["user", "password", "api_key"],
                )),
            ),
            s("clickhouse", admin, None),
            s("elasticsearch", admin, None),
            s("opensearch", admin, None),
        ]
    }

    /// Where a token may be written: a process's `env`, `cmd`, `setup`, `health`, or the
    /// adapter service's `migrate` and `seed` (run by a golden build as by a world).
    #[derive(Clone, Copy, Debug)]
    enum Place {
        Env,
        Cmd,
        Setup,
        Health,
        Migrate,
        Seed,
    }

    /// The file: the adapter service `db` in `setting`, the process `web` using it, and
    /// `token` written in `place`.
    fn config_text(setting: &Setting, place: Place, token: &str) -> String {
        let mut db = format!("[services.db]\nadapter = \"{}\"\n", setting.adapter);
        if !setting.toml.is_empty() {
            db.push_str(setting.toml);
            db.push('\n');
        }
        match place {
            Place::Migrate => db.push_str(&format!("migrate = \"migrate --to {token}\"\n")),
            Place::Seed => db.push_str(&format!("seed = \"seed {token}\"\n")),
            _ => {}
        }
        let mut web = "[services.web]\n".to_owned();
        let cmd_tail = match place {
            Place::Cmd => format!(" --db {token}"),
            _ => String::new(),
        };
        web.push_str(&format!(
            "cmd = \"serve --port ${{self.port}}{cmd_tail}\"\nurl = true\ndepends_on = [\"db\"]\n"
        ));
        match place {
            Place::Setup => web.push_str(&format!("setup = \"prepare {token}\"\n")),
            Place::Health => web.push_str(&format!("health = {{ cmd = \"probe {token}\" }}\n")),
            Place::Env => web.push_str(&format!("env = {{ DB_VALUE = \"{token}\" }}\n")),
            _ => {}
        }
        format!("[project]\nname = \"acme\"\n\n{db}\n{web}")
    }

    /// What a world's processes and a golden build resolve tokens with, for this file and
    /// the slice the adapter resolved: as `binky_controllers::env::tokens` builds it.
    fn world_tokens(address: &Address) -> binky_controllers::tokens::Tokens {
        let mut t = binky_controllers::tokens::Tokens {
            world: "w".into(),
            worktree_path: Some("/src/acme.worktrees/w".into()),
            ..Default::default()
        };
        t.ports.insert(("web".into(), String::new()), 4001);
        t.primary.insert("web".into(), String::new());
        t.urls.insert("web".into(), "http://localhost:4001".into());
        t.proxy_urls
            .insert("web".into(), "http://web.w.acme.localhost:8080".into());
        t.urls.insert("db".into(), address.url.clone());
        for (k, v) in &address.tokens {
            t.extra.insert(("db".into(), k.clone()), v.clone());
        }
        t
    }

    /// Every setting is of a built-in adapter, and every built-in adapter name has one.
    #[test]
    fn the_settings_cover_every_built_in_adapter_name() {
        let names = crate::adapters::Registry::default().builtin_names();
        let covered: Vec<&str> = settings().iter().map(|s| s.adapter).collect();
        for n in &names {
            assert!(covered.contains(n), "no setting of {n}");
        }
        for c in &covered {
            assert!(names.contains(c), "{c} is no built-in adapter");
        }
    }

    /// What an adapter's slice gives is exactly its documented list, none of it empty but
    /// where the server takes no such thing, with no admin credential in any of it.
    fn assert_address(setting: &Setting, a: &Address, may_be_empty: &[&str]) {
        let name = setting.adapter;
        let got: Vec<&str> = a.tokens.keys().map(String::as_str).collect();
        assert_eq!(got, documented(name).unwrap(), "{name} ({})", setting.toml);
        for (k, v) in &a.tokens {
            assert!(
                !v.is_empty() || may_be_empty.contains(&k.as_str()),
                "{name}: `{k}` is empty ({})",
                setting.toml
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
        assert!(
            !a.tokens.values().any(|v| v == "pw"),
            "{name}: {:?}",
            a.tokens
        );
    }

    fn place() -> impl proptest::strategy::Strategy<Value = Place> {
        proptest::sample::select(vec![
            Place::Env,
            Place::Cmd,
            Place::Setup,
            Place::Health,
            Place::Migrate,
            Place::Seed,
        ])
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 512,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Any adapter in any setting, any token name, written in any place a token may be
        /// (from the process or, in `migrate`/`seed`, as `${self.…}` too): a documented
        /// name passes `binky check` and resolves, in the world and in a golden build, to a
        /// value with no `${` left; any other name is a `check` error naming it, and the
        /// daemon's resolution lists it as unresolved (so `up` refuses it) rather than
        /// handing it to a program as text.
        #[test]
        fn every_token_name_of_every_adapter_and_setting_resolves_or_is_refused(
            which in proptest::arbitrary::any::<proptest::sample::Index>(),
            place in place(),
            documented_name in proptest::arbitrary::any::<proptest::sample::Index>(),
            other in "[a-z][a-z0-9_]{0,11}",
            pick_documented in proptest::bool::weighted(0.7),
            through_self in proptest::bool::ANY,
        ) {
            let settings = settings();
            let setting = &settings[which.index(settings.len())];
            let mut names: Vec<&str> = documented(setting.adapter).unwrap();
            names.extend(["url", "proxy_url"]);
            let name = if pick_documented {
                names[documented_name.index(names.len())]
            } else {
                proptest::prop_assume!(!names.contains(&other.as_str()));
                other.as_str()
            };
            let obj = match place {
                Place::Migrate | Place::Seed if through_self => "self",
                _ => "db",
            };
            let token = format!("${{{obj}.{name}}}");
            let text = config_text(setting, place, &token);
            let findings = crate::check::check(&text, std::path::Path::new("binky.toml"));
            let errors: Vec<_> = findings
                .iter()
                .filter(|f| f.level == crate::check::Level::Error)
                .collect();
            if pick_documented {
                proptest::prop_assert!(errors.is_empty(), "{text}\n{errors:#?}");
            } else {
                proptest::prop_assert_eq!(errors.len(), 1, "{}\n{:#?}", text, errors);
                proptest::prop_assert_eq!(errors[0].code, "unresolved-token");
                proptest::prop_assert!(errors[0].message.contains(&token), "{:?}", errors[0]);
                // And it names what the adapter gives instead.
                proptest::prop_assert!(
                    errors[0].message.contains(&format!("${{{obj}.port}}")),
                    "{:?}",
                    errors[0]
                );
            }
            let Some((adapter, c, may_be_empty)) = &setting.resolves else {
                return Ok(());
            };
            let slice = Slice {
                name: SLICE.into(),
                secret: "s3cr3t".into(),
            };
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a runtime");
            let address = rt
                .block_on(adapter.resolve(&slice, c))
                .unwrap_or_else(|e| panic!("{}: {e}", setting.adapter));
            let address = complete(setting.adapter, address);
            assert_address(setting, &address, may_be_empty);
            let tokens = world_tokens(&address);
            let loaded = crate::config::parse(&text, std::path::Path::new("binky.toml"))
                .expect("the file parses");
            let mut seen = false;
            for (service, svc) in &loaded.spec.services {
                for (field, value) in svc.token_fields() {
                    if !value.contains(&token) {
                        continue;
                    }
                    seen = true;
                    let resolved = tokens.resolve(value, service);
                    let unresolved = tokens.unresolved(value, service);
                    if pick_documented {
                        proptest::prop_assert!(
                            !resolved.contains("${"),
                            "{service}.{field}: {value} -> {resolved}"
                        );
                        proptest::prop_assert!(unresolved.is_empty(), "{unresolved:?}");
                    } else {
                        proptest::prop_assert_eq!(&unresolved, &vec![token.clone()]);
                    }
                }
            }
            proptest::prop_assert!(seen, "{token} is in no field of {text}");
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
