//! The admin URL, understood, and the admin connection.

use super::*;

/// The admin URL, understood.
#[derive(Debug)]
pub(super) struct Target {
    /// `mysql`, `mariadb`, `mysql+pymysql`…, as the user wrote it (lower-cased).
    pub(super) scheme: String,
    /// The host as written (`[::1]` with its brackets).
    pub(super) host: String,
    pub(super) port: u16,
    /// Query parameters handed on to slice URLs.
    pub(super) query: Vec<String>,
    /// `?socket=`: connect over this Unix socket.
    pub(super) socket: Option<String>,
    pub(super) user: String,
    pub(super) password: String,
    /// The server, for messages: `mysql://host:port`.
    pub(super) server: String,
}

impl Target {
    pub(super) fn parse(url: &str) -> Result<Target> {
        const FORM: &str = "mysql://USER:PASSWORD@HOST:3306";
        let Some(parts) = Url::parse(url) else {
            // Not echoed: without a scheme the credentials cannot be told apart.
            return Err(AdapterError::Config(format!(
                "admin_url is not a URL: write it as {FORM}"
            )));
        };
        let scheme = parts.scheme.to_ascii_lowercase();
        let (query, hostport) = (parts.query(), parts.host);
        let shown = format!("{scheme}://{hostport}");
        let family = scheme.split('+').next().unwrap_or("");
        if !matches!(family, "mysql" | "mariadb" | "percona") {
            return Err(AdapterError::Config(format!(
                "admin_url `{shown}` is not a MySQL URL: write it as {FORM}"
            )));
        }
        let user = percent_decode(parts.user().unwrap_or(""));
        let password = parts.password().map(percent_decode).unwrap_or_default();
        if user.is_empty() {
            return Err(AdapterError::Config(format!(
                "admin_url `{shown}` names no user: write it as {FORM}"
            )));
        }
        let (host, port) = split_host_port(hostport).ok_or_else(|| {
            AdapterError::Config(format!(
                "admin_url `{shown}` has no valid host and port: write it as {FORM}"
            ))
        })?;
        let mut kept = Vec::new();
        let mut socket = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let key_norm = key.to_ascii_lowercase().replace('-', "_");
            let value_norm = percent_decode(value).to_ascii_lowercase().replace('-', "_");
            let wants_tls = match key_norm.as_str() {
                "ssl_mode" | "sslmode" => matches!(
                    value_norm.as_str(),
                    "required" | "require" | "verify_ca" | "verify_identity" | "verify_full"
                ),
                "require_ssl" | "ssl" | "tls" | "usessl" | "requiressl" | "ssl_required" => {
                    matches!(
                        value_norm.as_str(),
                        "true" | "1" | "required" | "yes" | "on"
                    )
                }
                _ => false,
            };
            if wants_tls {
                return Err(AdapterError::Config(format!(
                    "admin_url `{shown}` asks for {key}={value}: TLS to the admin server is \
                     not supported yet; leave it out on a loopback or trusted network"
                )));
            }
            match key_norm.as_str() {
                "user" | "username" | "password" | "pass" => continue,
                "socket" => socket = Some(percent_decode(value)),
                _ => {}
            }
            kept.push(pair.to_owned());
        }
        Ok(Target {
            server: format!("{scheme}://{host}:{port}"),
            scheme,
            host,
            port,
            query: kept,
            socket,
            user,
            password,
        })
    }

    pub(super) fn opts(&self) -> OptsBuilder {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        OptsBuilder::default()
            .ip_or_hostname(host)
            .tcp_port(self.port)
            .user(Some(&self.user))
            .pass((!self.password.is_empty()).then_some(&self.password))
            // The host as written, not the server's socket found through it: a TCP login
            // and a socket login are different accounts on MySQL.
            .prefer_socket(false)
            .socket(self.socket.as_deref())
    }

    pub(super) fn slice_address(&self, slice: &Slice) -> Address {
        let user = fit_name(&slice.name, MAX_USER);
        let mut url = format!(
            "{}://{}:{}@{}:{}/{}",
            self.scheme,
            percent_encode(&user),
            percent_encode(&slice.secret),
            self.host,
            self.port,
            percent_encode(&slice.name)
        );
        if !self.query.is_empty() {
            url.push('?');
            url.push_str(&self.query.join("&"));
        }
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        let tokens = [
            ("user", user.clone()),
            ("password", slice.secret.clone()),
            ("database", slice.name.clone()),
            ("host", host.to_owned()),
            ("port", self.port.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        Address { url, tokens }
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port` (3306 by default); `None` when malformed.
pub(super) fn split_host_port(s: &str) -> Option<(String, u16)> {
    let (host, port) = binky_controllers::url::host_port(s)?;
    let port = match port {
        None => 3306,
        Some(p) => p.parse().ok().filter(|p| *p != 0)?,
    };
    let host = if host.is_empty() || host == "[]" {
        "localhost"
    } else {
        host
    };
    Some((host.to_owned(), port))
}

/// An admin connection.
pub(super) struct Admin {
    pub(super) conn: Conn,
    pub(super) server: String,
    pub(super) scrub: Scrub,
    /// `GRANT … ON db.*` takes `_` literally (MySQL with `partial_revokes`).
    pub(super) literal_grants: bool,
    /// The server is MariaDB (not MySQL or Percona).
    pub(super) mariadb: bool,
}

impl Admin {
    /// Connect with the admin URL; `secrets` are scrubbed from messages too.
    pub(super) async fn connect(cfg: &AdapterConfig, secrets: &[&str]) -> Result<Admin> {
        let url = admin_url(cfg)?;
        let target = Target::parse(&url)?;
        let mut hide = vec![
            target.password.as_str(),
            binky_controllers::url::password(&url).unwrap_or(""),
        ];
        hide.extend_from_slice(secrets);
        let scrub = Scrub::new(hide);
        let server = target.server.clone();
        let conn = match tokio::time::timeout(CONNECT_TIMEOUT, Conn::new(target.opts())).await {
            Err(_) => {
                return Err(AdapterError::Unreachable {
                    server,
                    detail: format!("no answer within {} s", CONNECT_TIMEOUT.as_secs()),
                })
            }
            Ok(Err(mysql_async::Error::Server(e))) if REFUSED.contains(&e.code) => {
                return Err(AdapterError::Unreachable {
                    server,
                    detail: scrub.apply(&format!(
                        "the server refused admin_url's credentials (ERROR {}: {}); check \
                         the user and password in admin_url",
                        e.code, e.message
                    )),
                })
            }
            // Refused, reset, starting up, too many connections: "not usable yet".
            Ok(Err(e)) => {
                return Err(AdapterError::Unreachable {
                    server,
                    detail: scrub.apply(&describe(&e)),
                })
            }
            Ok(Ok(conn)) => conn,
        };
        let mut admin = Admin {
            conn,
            server,
            scrub,
            literal_grants: false,
            mariadb: false,
        };
        let secs = VERB_TIMEOUT.as_secs();
        admin
            .execute(
                "configuring the session",
                &format!(
                    "SET SESSION sql_mode = '{SESSION_SQL_MODE}', lock_wait_timeout = {secs}, \
                     innodb_lock_wait_timeout = {secs}"
                ),
            )
            .await?;
        let partial = admin
            .rows(
                "reading the server's settings",
                "SHOW VARIABLES LIKE 'partial\\_revokes'",
            )
            .await?;
        admin.literal_grants = partial
            .first()
            .and_then(|r| text(r, 1))
            .is_some_and(|v| v.eq_ignore_ascii_case("ON"));
        let version = admin
            .rows("reading the server's version", "SELECT VERSION()")
            .await?;
        admin.mariadb = version
            .first()
            .and_then(|r| text(r, 0))
            .is_some_and(|v| v.to_ascii_lowercase().contains("mariadb"));
        Ok(admin)
    }

    /// Close the connection politely (the server logs an aborted one), then hand on `result`.
    pub(super) async fn finish<T>(self, result: Result<T>) -> Result<T> {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.conn.disconnect()).await;
        result
    }

    pub(super) fn error(&self, doing: &str, e: &mysql_async::Error) -> AdapterError {
        let detail = self.scrub.apply(&format!("{doing}: {}", describe(e)));
        let transient = match e {
            mysql_async::Error::Server(s) => TRANSIENT.contains(&s.code),
            mysql_async::Error::Io(_) => true,
            mysql_async::Error::Driver(DriverError::ConnectionClosed) => true,
            _ => false,
        };
        if transient {
            return AdapterError::Unreachable {
                server: self.server.clone(),
                detail,
            };
        }
        let hint = match e {
            mysql_async::Error::Server(s) if PRIVILEGE.contains(&s.code) => {
                "; admin_url's user needs CREATE USER, ALL PRIVILEGES WITH GRANT OPTION, \
                 PROCESS and CONNECTION ADMIN or SUPER (root has them)"
            }
            _ => "",
        };
        AdapterError::Server {
            server: self.server.clone(),
            detail: format!("{detail}{hint}"),
        }
    }

    pub(super) fn server_error(&self, detail: &str) -> AdapterError {
        AdapterError::Server {
            server: self.server.clone(),
            detail: self.scrub.apply(detail),
        }
    }

    pub(super) async fn execute(&mut self, doing: &str, sql: &str) -> Result<()> {
        match self.conn.query_drop(sql).await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.error(doing, &e)),
        }
    }

    /// Run `sql` under `sql_mode` (a routine's or a trigger's own), then restore the
    /// session's.
    pub(super) async fn with_sql_mode(&mut self, doing: &str, mode: &str, sql: &str) -> Result<()> {
        self.execute(
            doing,
            &format!("SET SESSION sql_mode = {}", quote_literal(mode)),
        )
        .await?;
        let result = self.execute(doing, sql).await;
        self.execute(
            doing,
            &format!("SET SESSION sql_mode = '{SESSION_SQL_MODE}'"),
        )
        .await?;
        result
    }

    pub(super) async fn rows(&mut self, doing: &str, sql: &str) -> Result<Vec<Row>> {
        match self.conn.query::<Row, _>(sql).await {
            Ok(rows) => Ok(rows),
            Err(e) => Err(self.error(doing, &e)),
        }
    }

    pub(super) async fn rows_with(
        &mut self,
        doing: &str,
        sql: &str,
        params: Vec<Value>,
    ) -> Result<Vec<Row>> {
        match self.conn.exec::<Row, _, _>(sql, params).await {
            Ok(rows) => Ok(rows),
            Err(e) => Err(self.error(doing, &e)),
        }
    }

    /// As [`Admin::rows_with`], but a statement on binky's catalog before it exists (no
    /// such database or table) answers no rows.
    pub(super) async fn rows_with_missing_ok(
        &mut self,
        doing: &str,
        sql: &str,
        params: Vec<Value>,
    ) -> Result<Vec<Row>> {
        match self.conn.exec::<Row, _, _>(sql, params).await {
            Ok(rows) => Ok(rows),
            // Unknown database, unknown table.
            Err(mysql_async::Error::Server(e)) if matches!(e.code, 1049 | 1146) => Ok(Vec::new()),
            Err(e) => Err(self.error(doing, &e)),
        }
    }

    pub(super) async fn database_exists(&mut self, name: &str) -> Result<bool> {
        let rows = self
            .rows_with(
                "looking up the database",
                "SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
                vec![Value::from(name)],
            )
            .await?;
        Ok(!rows.is_empty())
    }

    pub(super) async fn user_exists(&mut self, name: &str) -> Result<bool> {
        let rows = self
            .rows_with(
                "looking up the user",
                "SELECT 1 FROM mysql.user WHERE User = ? AND Host = '%'",
                vec![Value::from(fit_name(name, MAX_USER))],
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// `ALTER USER … ACCOUNT LOCK|UNLOCK`; a server too old for it (before MariaDB 10.4
    /// or MySQL 5.7.6) says "syntax error", and the lock is skipped.
    pub(super) async fn lock_account(&mut self, account: &str, lock: bool) -> Result<()> {
        let verb = if lock { "LOCK" } else { "UNLOCK" };
        match self
            .conn
            .query_drop(format!("ALTER USER {account} ACCOUNT {verb}"))
            .await
        {
            Ok(()) => Ok(()),
            Err(mysql_async::Error::Server(e)) if e.code == 1064 => Ok(()),
            Err(e) => Err(self.error(&format!("{}ing the user", verb.to_lowercase()), &e)),
        }
    }

    /// End every session of the slice's user or in its database but this one.
    pub(super) async fn end_sessions(&mut self, name: &str) -> Result<()> {
        let doing = "ending the slice's sessions";
        let ids: Vec<String> = self
            .rows_with(
                doing,
                "SELECT ID FROM information_schema.PROCESSLIST \
                 WHERE (USER = ? OR DB = ?) AND ID <> CONNECTION_ID()",
                vec![Value::from(fit_name(name, MAX_USER)), Value::from(name)],
            )
            .await?
            .iter()
            .filter_map(|r| text(r, 0))
            .collect();
        for id in ids {
            let Ok(id) = id.parse::<u64>() else { continue };
            match self.conn.query_drop(format!("KILL CONNECTION {id}")).await {
                Ok(()) => {}
                // Gone meanwhile.
                Err(mysql_async::Error::Server(e)) if e.code == 1094 => {}
                Err(e) => return Err(self.error(doing, &e)),
            }
        }
        Ok(())
    }

    /// The database name as `GRANT … ON <it>.*` must read it to mean this one database.
    pub(super) fn grant_target(&self, name: &str) -> String {
        if self.literal_grants {
            quote_ident(name)
        } else {
            quote_ident(&name.replace('_', "\\_"))
        }
    }
}
