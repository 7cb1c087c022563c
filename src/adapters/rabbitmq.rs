//! The `rabbitmq` adapter: a virtual host per world, with a user of its own that may use
//! that vhost and no other.
//!
//! A slice `bk_acme_login_fix_mq` is the vhost `bk_acme_login_fix_mq` and a user of the same
//! name whose password is the slice's secret, tagged `management` (so it may look at its
//! own vhost in the management UI and API) and granted configure/write/read `.*` on its
//! vhost only. `${mq.url}` is `amqp://bk_acme_login_fix_mq:<secret>@host:5672/bk_acme_login_fix_mq`;
//! the tokens `${mq.vhost}`, `${mq.user}`, `${mq.password}` and `${mq.management_url}`
//! (the management API, without credentials) come with it.
//!
//! # Configuration
//! - `admin_url = "http://USER:PASSWORD@HOST:15672"`: the **management** API (binky 0.1.2's
//!   convention), of a user tagged `administrator`; `$BINKY_RABBITMQ_URL` when absent.
//! - `options.amqp_port`: the AMQP port put in the address (default 5672, 5671 for
//!   `amqps`); `options.amqp_scheme`: `amqp` (default) or `amqps`. The AMQP host is the
//!   admin URL's host.
//!
//! # Why the management API, not `rabbitmqctl`
//! The HTTP API works against a remote broker, and against one in a container, with
//! nothing but a URL; `rabbitmqctl` must run where it can reach the node's Erlang
//! distribution port with the node's Erlang cookie, i.e. on the broker's machine as its
//! user, and it starts an Erlang VM per call (seconds). The price: the broker needs the
//! `rabbitmq_management` plugin (enabled in every official image tagged `-management`).
//!
//! # Which home made a slice
//! The vhost's description: `binky slice of home <id>` (see [`crate::adapters::Maker`]); a
//! provision never rewrites an existing vhost's. The management API has no compare-and-set:
//! of two homes claiming one vhost at once, the last write wins and the other reads it back.
//!
//! # Guarantees
//! - The broker enforces isolation: a world's credentials open only its own vhost (AMQP
//!   `Connection.Open` to another vhost is refused with `NOT_ALLOWED`, the management API
//!   answers 401/403 for other vhosts). Queues, exchanges and bindings live inside a vhost.
//! - Provision is idempotent and heals drift: it rewrites the user's password and tags and
//!   its permissions, and removes permissions the user was given on any other vhost.
//! - Teardown deletes the vhost (its queues, exchanges, messages; the broker closes its
//!   connections), then the user. Either being gone already is success.
//! - Errors never carry a password; a broker that does not answer, or refuses the admin
//!   credentials, is [`AdapterError::Unreachable`] (retried).
//!
//! # Caveats
//! - No clone: a vhost's definitions could be exported and imported, but messages cannot
//!   be copied server-side, and a fresh vhost is what a world wants.
//! - Resource limits (max connections/queues per vhost) are not set; one world can still
//!   exhaust the broker's memory or disk alarms for all.

use std::collections::BTreeSet;

use hyper::Method;
use serde_json::json;

use binky_controllers::url::{host_port, percent_encode};

use super::http::{Endpoint, Http, Response};
use super::{mark, Adapter, AdapterConfig, AdapterError, Address, Maker, Result, Slice};

/// Where the admin URL comes from when the service has none (binky 0.1.2's variable).
pub const ENV_URL: &str = super::AdapterKind::Rabbitmq.env_var();

/// The rabbitmq adapter.
pub struct RabbitMq;

/// The broker, from the configuration.
struct Broker {
    api: Endpoint,
    http: Http,
    /// `amqp` or `amqps`.
    amqp_scheme: String,
    amqp_port: u16,
    /// The AMQP host (the admin URL's, IPv6 in brackets).
    host: String,
}

impl Broker {
    fn from_config(cfg: &AdapterConfig) -> Result<Broker> {
        let url = cfg.admin_url_or_env(ENV_URL).ok_or_else(|| {
            AdapterError::Config(format!(
                "the rabbitmq adapter needs the management API of a broker: set \
                 `admin_url = \"http://USER:PASSWORD@HOST:15672\"` on the service in \
                 binky.toml (or ${ENV_URL}), with the rabbitmq_management plugin enabled"
            ))
        })?;
        let default_port = if url.to_ascii_lowercase().starts_with("https://") {
            15671
        } else {
            15672
        };
        let api = Endpoint::parse(&url, default_port).map_err(|e| match e {
            AdapterError::Config(m) => AdapterError::Config(format!(
                "{m} (the rabbitmq adapter's admin_url is the management API, \
                 http://USER:PASSWORD@HOST:15672, not the amqp:// address)"
            )),
            other => other,
        })?;
        let amqp_scheme = cfg
            .option("amqp_scheme")
            .unwrap_or("amqp")
            .to_ascii_lowercase();
        if amqp_scheme != "amqp" && amqp_scheme != "amqps" {
            return Err(AdapterError::Config(format!(
                "options.amqp_scheme `{amqp_scheme}` is neither `amqp` nor `amqps`"
            )));
        }
        let amqp_port = match cfg.option("amqp_port") {
            Some(p) => p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
                AdapterError::Config(format!(
                    "options.amqp_port `{p}` is not a port number (1–65535)"
                ))
            })?,
            None if amqp_scheme == "amqps" => 5671,
            None => 5672,
        };
        // `Endpoint::parse` wrote the port: what is before it is the host.
        let host = host_port(&api.authority)
            .map_or(api.authority.as_str(), |(h, _)| h)
            .to_owned();
        Ok(Broker {
            api,
            http: Http::new(),
            amqp_scheme,
            amqp_port,
            host,
        })
    }

    /// One call to the management API as admin. A refused admin is worth retrying (the
    /// credentials may be fixed meanwhile), like a broker that is down.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<Response> {
        let body = body.map(|b| ("application/json", b.to_string().into_bytes()));
        let resp = self
            .http
            .call(&self.api, method.clone(), path, body, &[])
            .await?;
        match resp.status {
            401 => Err(AdapterError::Unreachable {
                server: self.api.server.clone(),
                detail: format!(
                    "{method} {path}: the management API refused admin_url's credentials \
                     (401); check the user and password in admin_url \
                     (http://USER:PASSWORD@HOST:15672)"
                ),
            }),
            403 => Err(AdapterError::Server {
                server: self.api.server.clone(),
                detail: format!(
                    "{method} {path}: forbidden (403); admin_url's user needs the \
                     `administrator` tag (rabbitmqctl set_user_tags USER administrator)"
                ),
            }),
            // Starting, or an alarm: the broker is there but cannot serve yet.
            502..=504 => Err(AdapterError::Unreachable {
                server: self.api.server.clone(),
                detail: format!("{method} {path}: HTTP {} {}", resp.status, resp.text(200)),
            }),
            404 => Ok(resp),
            _ => resp.expect_ok(&self.api.server, &format!("{method} {path}")),
        }
    }

    /// Like [`Broker::call`], with 404 an error too.
    async fn call_ok(
        &self,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<Response> {
        let resp = self.call(method.clone(), path, body).await?;
        if resp.status == 404 {
            return Err(AdapterError::Server {
                server: self.api.server.clone(),
                detail: format!(
                    "{method} {path}: not found (404) {}; is admin_url the management API \
                     (port 15672) with the rabbitmq_management plugin enabled?",
                    resp.text(200)
                ),
            });
        }
        Ok(resp)
    }

    /// The vhost `name` as the management API describes it; `None` when there is none.
    async fn vhost(&self, name: &str) -> Result<Option<serde_json::Value>> {
        let resp = self
            .call(
                Method::GET,
                &format!("/api/vhosts/{}", percent_encode(name)),
                None,
            )
            .await?;
        if resp.status == 404 {
            return Ok(None);
        }
        resp.json(&self.api.server).map(Some)
    }

    /// Is there a user `name`?
    async fn has_user(&self, name: &str) -> Result<bool> {
        let resp = self
            .call(
                Method::GET,
                &format!("/api/users/{}", percent_encode(name)),
                None,
            )
            .await?;
        Ok(resp.status != 404)
    }

    /// Which home the vhost `name`'s description names; unmarked when it names none (or
    /// only its user is left), absent when neither is there.
    async fn maker(&self, name: &str) -> Result<Maker> {
        match self.vhost(name).await? {
            Some(vhost) => Ok(vhost
                .get("description")
                .and_then(|d| d.as_str())
                .and_then(mark::parse)
                .unwrap_or(Maker::Unmarked)),
            None if self.has_user(name).await? => Ok(Maker::Unmarked),
            None => Ok(Maker::Absent),
        }
    }

    /// Names from a listing (`/api/vhosts`, `/api/users`).
    async fn names(&self, path: &str) -> Result<Vec<String>> {
        let resp = self.call_ok(Method::GET, path, None).await?;
        let doc = resp.json(&self.api.server)?;
        Ok(doc
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.get("name")?.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    }
}

/// Slice names are `[a-z0-9_]`: safe as vhost and user names, and in a URL path.
use super::check_plain_name as check_name;

/// The AMQP address of a slice.
fn amqp_url(broker: &Broker, slice: &Slice) -> String {
    format!(
        "{}://{}:{}@{}:{}/{}",
        broker.amqp_scheme,
        percent_encode(&slice.name),
        percent_encode(&slice.secret),
        broker.host,
        broker.amqp_port,
        percent_encode(&slice.name)
    )
}

#[async_trait::async_trait]
impl Adapter for RabbitMq {
    fn kind(&self) -> Option<super::AdapterKind> {
        Some(super::AdapterKind::Rabbitmq)
    }

    async fn provision(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        check_name(slice)?;
        let broker = Broker::from_config(cfg)?;
        let name = percent_encode(&slice.name);
        // Made when missing, marked binky's; an existing vhost keeps its description (the
        // mark of the home that made it).
        if broker.vhost(&slice.name).await?.is_none() {
            broker
                .call_ok(
                    Method::PUT,
                    &format!("/api/vhosts/{name}"),
                    Some(json!({ "description": mark::PREFIX })),
                )
                .await?;
        }
        // PUT replaces the user whole: password and tags are rewritten every time.
        broker
            .call_ok(
                Method::PUT,
                &format!("/api/users/{name}"),
                Some(json!({ "password": slice.secret, "tags": "management" })),
            )
            .await?;
        broker
            .call_ok(
                Method::PUT,
                &format!("/api/permissions/{name}/{name}"),
                Some(json!({ "configure": ".*", "write": ".*", "read": ".*" })),
            )
            .await?;
        // Drift: permissions on any other vhost (given by hand) are taken away.
        let resp = broker
            .call_ok(Method::GET, &format!("/api/users/{name}/permissions"), None)
            .await?;
        let doc = resp.json(&broker.api.server)?;
        let others: BTreeSet<String> = doc
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("vhost")?.as_str().map(str::to_owned))
            .filter(|v| *v != slice.name)
            .collect();
        for vhost in others {
            broker
                .call(
                    Method::DELETE,
                    &format!("/api/permissions/{}/{name}", percent_encode(&vhost)),
                    None,
                )
                .await?;
        }
        Ok(())
    }

    async fn resolve(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Address> {
        check_name(slice)?;
        let broker = Broker::from_config(cfg)?;
        Ok(Address::new(
            amqp_url(&broker, slice),
            [
                ("vhost", slice.name.clone()),
                ("user", slice.name.clone()),
                ("password", slice.secret.clone()),
                ("management_url", broker.api.url("")),
            ],
        ))
    }

    async fn teardown(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        check_name(slice)?;
        let broker = Broker::from_config(cfg)?;
        let name = percent_encode(&slice.name);
        // The vhost first: its queues and messages go, and the broker closes every
        // connection to it. A 404 is a slice already (half) torn down.
        broker
            .call(Method::DELETE, &format!("/api/vhosts/{name}"), None)
            .await?;
        broker
            .call(Method::DELETE, &format!("/api/users/{name}"), None)
            .await?;
        Ok(())
    }

    async fn list(&self, cfg: &AdapterConfig) -> Result<Vec<String>> {
        let broker = Broker::from_config(cfg)?;
        // Users too: a teardown cut short between the two deletes leaves one.
        let mut names: BTreeSet<String> = BTreeSet::new();
        for path in ["/api/vhosts?columns=name", "/api/users?columns=name"] {
            names.extend(
                broker
                    .names(path)
                    .await?
                    .into_iter()
                    .filter(|n| n.starts_with("bk_")),
            );
        }
        Ok(names.into_iter().collect())
    }

    async fn maker(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Maker> {
        check_name(slice)?;
        Broker::from_config(cfg)?.maker(&slice.name).await
    }

    async fn claim(&self, slice: &Slice, cfg: &AdapterConfig, home: &str) -> Result<Maker> {
        check_name(slice)?;
        super::check_home(home)?;
        let broker = Broker::from_config(cfg)?;
        let found = broker.maker(&slice.name).await?;
        if found.other_than(home).is_some() || found == Maker::Absent {
            return Ok(found);
        }
        // The management API has no compare-and-set: of two homes claiming one vhost at
        // once (each adopting a vhost made before homes had an identity), the last write
        // wins, and the loser finds it when it reads the mark back.
        broker
            .call_ok(
                Method::PUT,
                &format!("/api/vhosts/{}", percent_encode(&slice.name)),
                Some(json!({ "description": mark::text(home) })),
            )
            .await?;
        broker.maker(&slice.name).await
    }

    async fn exists(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Option<bool>> {
        check_name(slice)?;
        let broker = Broker::from_config(cfg)?;
        let resp = broker
            .call(
                Method::GET,
                &format!("/api/vhosts/{}", percent_encode(&slice.name)),
                None,
            )
            .await?;
        Ok(Some(resp.status != 404))
    }
}

#[cfg(test)]
mod tests {
    use super::super::http_fake::cfg;
    use super::*;

    fn slice() -> Slice {
        Slice {
            name: "bk_acme_login_fix_mq".into(),
            secret: "0123abcd".into(),
        }
    }

    fn resolve(c: &AdapterConfig) -> Result<Address> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
            .block_on(RabbitMq.resolve(&slice(), c))
    }

    #[test]
    fn the_address_is_the_slice_users_amqp_url_on_the_admin_urls_host() {
        let a = resolve(&cfg("http://admin:s3cret@127.0.0.1:15672", &[])).unwrap();
        assert_eq!(
            a.url,
            "amqp://bk_acme_login_fix_mq:0123abcd@127.0.0.1:5672/bk_acme_login_fix_mq"
        );
        assert_eq!(a.tokens["vhost"], "bk_acme_login_fix_mq");
        assert_eq!(a.tokens["user"], "bk_acme_login_fix_mq");
        assert_eq!(a.tokens["management_url"], "http://127.0.0.1:15672");
        assert!(!a.url.contains("s3cret") && !a.tokens.values().any(|v| v.contains("s3cret")));
        let a = resolve(&cfg("https://admin:pw@[::1]", &[("amqp_scheme", "amqps")])).unwrap();
        assert_eq!(
            a.url,
            "amqps://bk_acme_login_fix_mq:0123abcd@[::1]:5671/bk_acme_login_fix_mq"
        );
        assert_eq!(a.tokens["management_url"], "https://[::1]:15671");
        let a = resolve(&cfg("http://admin:pw@mq", &[("amqp_port", "5673")])).unwrap();
        assert!(
            a.url.ends_with("@mq:5673/bk_acme_login_fix_mq"),
            "{}",
            a.url
        );
    }

    #[test]
    fn bad_settings_name_the_fix_without_the_password() {
        for (url, opts, want) in [
            ("amqp://admin:topsecret@h:5672", vec![], "15672"),
            (
                "http://admin:topsecret@h",
                vec![("amqp_port", "x")],
                "amqp_port",
            ),
            (
                "http://admin:topsecret@h",
                vec![("amqp_scheme", "mqtt")],
                "amqp_scheme",
            ),
        ] {
            let e = resolve(&cfg(url, &opts)).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
            assert!(!e.contains("topsecret"), "{e}");
        }
        let e = check_name(&Slice {
            name: "bk_a/../b".into(),
            secret: String::new(),
        })
        .unwrap_err();
        assert!(matches!(e, AdapterError::Config(_)));
    }
}
