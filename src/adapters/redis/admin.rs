//! An admin connection to a shared Redis server (`admin_url`): parsing the address, bounded
//! connects, errors that never carry a password, and the questions both the `database` and
//! the `prefix` mode ask the server.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, ErrorKind, RedisError, ServerErrorKind, Value};

use binky_controllers::url::{password_decoded, Url};

use super::super::{redact, AdapterConfig, AdapterError, Result};

/// How long connecting (TCP and authentication) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one command may take.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(15);

/// The shared server, from `admin_url`.
pub(super) struct Server {
    /// The admin URL as given (credentials included).
    url: String,
    /// `redis://host:port`, for messages.
    pub(super) shown: String,
    /// `redis` or `rediss`.
    pub(super) scheme: &'static str,
    /// `host:port` as written in the URL (IPv6 in brackets).
    pub(super) authority: String,
    /// The host alone (IPv6 without brackets) and the port (6379 when the URL has none).
    pub(super) host: String,
    /// The port.
    pub(super) port: u16,
    /// The database of the admin URL (`/3`), 0 without one.
    pub(super) db: i64,
    /// Strings that must never appear in a message.
    secrets: Vec<String>,
}

impl Server {
    /// The server `cfg`'s admin address names; an error naming the fix without one.
    pub(super) fn from_config(cfg: &AdapterConfig) -> Result<Server> {
        let Some(url) = cfg.admin_url.as_deref() else {
            return Err(AdapterError::Config(
                "the redis adapter needs the server's admin address: set \
                 `admin_url = \"redis://USER:PASSWORD@HOST:PORT/DB\"` on the service in \
                 binky.toml, or install redis-server so binky can run its own"
                    .into(),
            ));
        };
        let shown = redact(url);
        let bad = |why: String| {
            AdapterError::Config(format!(
                "admin_url {shown}: {why}; write it as redis://USER:PASSWORD@HOST:PORT/DB"
            ))
        };
        let parts = Url::parse(url).ok_or_else(|| bad("not a URL".into()))?;
        let scheme = match parts.scheme {
            "redis" | "valkey" => "redis",
            "rediss" | "valkeys" => {
                return Err(bad(
                    "TLS (rediss://) is not supported by binky's redis adapter yet".into(),
                ))
            }
            other => return Err(bad(format!("`{other}://` is not a TCP redis address"))),
        };
        let authority = parts.host.to_owned();
        if authority.is_empty() {
            return Err(bad("no host".into()));
        }
        let info = redis::Client::open(url)
            .map_err(|e| bad(e.to_string()))?
            .get_connection_info()
            .clone();
        let ConnectionAddr::Tcp(host, port) = info.addr() else {
            return Err(bad("not a TCP address".into()));
        };
        let (host, port) = (host.clone(), *port);
        let settings = info.redis_settings();
        let mut secrets: Vec<String> = settings.password().map(str::to_owned).into_iter().collect();
        if let Some(raw) = password_decoded(url) {
            secrets.push(raw);
        }
        Ok(Server {
            url: url.to_owned(),
            shown,
            scheme,
            authority,
            host,
            port,
            db: settings.db(),
            secrets,
        })
    }

    /// Remove every secret from a message.
    pub(super) fn scrub(&self, text: &str, extra: &[&str]) -> String {
        super::super::scrub_with(text, &self.secrets, extra)
    }

    /// A server error as an adapter error: unreachable (worth retrying) or not.
    pub(super) fn error(&self, what: &str, err: &RedisError, extra: &[&str]) -> AdapterError {
        let code = err.code().unwrap_or("");
        let refused =
            err.kind() == ErrorKind::AuthenticationFailed || matches!(code, "NOAUTH" | "WRONGPASS");
        let detail = if refused {
            format!(
                "{what}: the server refused admin_url's credentials ({err}); check the user \
                 and password in admin_url"
            )
        } else {
            format!("{what}: {err}")
        };
        let detail = self.scrub(&detail, extra);
        let unreachable = err.is_io_error()
            || err.is_timeout()
            || err.is_connection_refusal()
            || err.is_connection_dropped()
            || refused
            || matches!(
                err.kind(),
                ErrorKind::Server(ServerErrorKind::BusyLoading)
                    | ErrorKind::Server(ServerErrorKind::MasterDown)
                    | ErrorKind::Server(ServerErrorKind::TryAgain)
            )
            || code == "LOADING";
        if unreachable {
            return AdapterError::Unreachable {
                server: self.shown.clone(),
                detail,
            };
        }
        if err.kind() == ErrorKind::InvalidClientConfig {
            return AdapterError::Config(format!("admin_url {}: {detail}", self.shown));
        }
        let hint = if code == "NOPERM" {
            "; the admin_url's user needs `+@all` (ACL SETUSER, ACL DELUSER, ACL LIST, INFO, \
             SCAN, CONFIG GET, FLUSHDB)"
        } else {
            ""
        };
        AdapterError::Server {
            server: self.shown.clone(),
            detail: format!("{detail}{hint}"),
        }
    }

    /// One admin connection, with bounded connect and command times.
    pub(super) async fn connect(&self) -> Result<MultiplexedConnection> {
        let client = redis::Client::open(self.url.as_str())
            .map_err(|e| self.error("bad admin_url", &e, &[]))?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT));
        // The outer bound covers what the client's own timeouts might not (DNS).
        match tokio::time::timeout(
            CONNECT_TIMEOUT + Duration::from_secs(1),
            client.get_multiplexed_async_connection_with_config(&config),
        )
        .await
        {
            Ok(Ok(con)) => Ok(con),
            Ok(Err(e)) => Err(self.error("connect", &e, &[])),
            Err(_) => Err(AdapterError::Unreachable {
                server: self.shown.clone(),
                detail: format!("no answer within {} s", CONNECT_TIMEOUT.as_secs()),
            }),
        }
    }

    /// `cmd`'s answer on the admin connection; a failure is told as `doing`, with `extra`
    /// (a slice's secret) scrubbed as well as the server's own.
    pub(super) async fn query<T: redis::FromRedisValue>(
        &self,
        con: &mut MultiplexedConnection,
        cmd: &redis::Cmd,
        doing: &str,
        extra: &[&str],
    ) -> Result<T> {
        cmd.query_async(con)
            .await
            .map_err(|e| self.error(doing, &e, extra))
    }

    /// Refuse servers whose ACLs cannot isolate a world (see the module doc).
    pub(super) async fn check_version(&self, con: &mut MultiplexedConnection) -> Result<()> {
        let info: String = self
            .query(con, redis::cmd("INFO").arg("server"), "INFO server", &[])
            .await?;
        let version = info_field(&info, "redis_version").unwrap_or_default();
        let major: u32 = version
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        if major >= 7 {
            return Ok(());
        }
        let why = if major < 6 {
            "it has no ACL users (Redis 6 added them)"
        } else {
            "binky's isolation rules rely on Redis 7's ACLs (per-subcommand rules, SORT BY/GET \
             checked against key patterns)"
        };
        Err(AdapterError::Config(format!(
            "{} runs Redis {version}, and {why}: point admin_url at Redis 7 or newer, or \
             Valkey",
            self.shown
        )))
    }

    /// Which of `names` the server has (`COMMAND INFO` answers nil for unknown ones).
    pub(super) async fn known_commands(
        &self,
        con: &mut MultiplexedConnection,
        names: &[&str],
    ) -> Result<BTreeSet<String>> {
        let infos: Vec<Value> = self
            .query(
                con,
                redis::cmd("COMMAND").arg("INFO").arg(names),
                "COMMAND INFO",
                &[],
            )
            .await?;
        Ok(names
            .iter()
            .zip(infos)
            .filter(|(_, v)| !matches!(v, Value::Nil))
            .map(|(n, _)| (*n).to_owned())
            .collect())
    }

    /// Persist users when the server keeps them in an ACL file; a server without one keeps
    /// them in memory only, which is its operator's choice.
    pub(super) async fn save_acl(&self, con: &mut MultiplexedConnection) -> Result<()> {
        match redis::cmd("ACL").arg("SAVE").query_async::<()>(con).await {
            Ok(()) => Ok(()),
            Err(e) if e.to_string().contains("not configured to use an ACL file") => Ok(()),
            Err(e) => Err(self.error(
                "ACL SAVE (the slice's user would not survive a restart)",
                &e,
                &[],
            )),
        }
    }

    /// Write the user `name` with `rules` (replacing what it had), and persist it.
    pub(super) async fn set_user(
        &self,
        con: &mut MultiplexedConnection,
        name: &str,
        rules: &[String],
        secret: &str,
    ) -> Result<()> {
        let doing = format!("ACL SETUSER {name}");
        let mut set_user = redis::cmd("ACL");
        set_user.arg("SETUSER").arg(name).arg(rules);
        self.query::<()>(con, &set_user, &doing, &[secret]).await?;
        self.save_acl(con).await
    }

    /// Delete the user `name` (the server drops its connections), and persist that.
    pub(super) async fn delete_user(
        &self,
        con: &mut MultiplexedConnection,
        name: &str,
    ) -> Result<()> {
        let doing = format!("ACL DELUSER {name}");
        self.query::<i64>(con, redis::cmd("ACL").arg("DELUSER").arg(name), &doing, &[])
            .await?;
        self.save_acl(con).await
    }

    /// The server's users and their rules (`ACL LIST`: `user <name> <rule> <rule> …`).
    pub(super) async fn users(
        &self,
        con: &mut MultiplexedConnection,
    ) -> Result<BTreeMap<String, Vec<String>>> {
        let lines: Vec<String> = self
            .query(con, redis::cmd("ACL").arg("LIST"), "ACL LIST", &[])
            .await?;
        Ok(lines
            .iter()
            .filter_map(|l| {
                let mut words = l.split_whitespace();
                (words.next() == Some("user")).then_some(())?;
                let name = words.next()?.to_owned();
                Some((name, words.map(str::to_owned).collect()))
            })
            .collect())
    }

    /// The databases holding keys (`INFO keyspace`: `db0:keys=3,…`).
    pub(super) async fn databases_with_keys(
        &self,
        con: &mut MultiplexedConnection,
    ) -> Result<BTreeSet<i64>> {
        let info: String = self
            .query(
                con,
                redis::cmd("INFO").arg("keyspace"),
                "INFO keyspace",
                &[],
            )
            .await?;
        Ok(info
            .lines()
            .filter_map(|l| l.strip_prefix("db")?.split_once(':')?.0.parse().ok())
            .collect())
    }

    /// How many databases the server has (`CONFIG GET databases`); Redis' default, 16, when
    /// the server will not say (a hosted Redis may rename `CONFIG`).
    pub(super) async fn databases(&self, con: &mut MultiplexedConnection) -> i64 {
        let answer: Result<BTreeMap<String, String>, _> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("databases")
            .query_async(con)
            .await;
        match answer {
            Ok(map) => map
                .get("databases")
                .and_then(|n| n.parse().ok())
                .unwrap_or(16),
            Err(e) => {
                tracing::warn!(server = %self.shown, error = %self.scrub(&e.to_string(), &[]), "CONFIG GET databases refused; assuming 16");
                16
            }
        }
    }

    /// `SELECT db` on the admin connection.
    pub(super) async fn select(&self, con: &mut MultiplexedConnection, db: i64) -> Result<()> {
        let doing = format!("SELECT {db}");
        self.query(con, redis::cmd("SELECT").arg(db), &doing, &[])
            .await
    }
}

/// `field:value` from an `INFO` answer.
pub(super) fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':').map(str::trim))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields_are_read() {
        let info = "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:0\r\n";
        assert_eq!(info_field(info, "redis_version"), Some("7.0.15"));
        assert_eq!(info_field(info, "redis_git"), None);
    }
}
