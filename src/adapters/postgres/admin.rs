//! The admin URL, understood, and the admin connection with its errors.

use super::*;

/// The admin URL, understood.
pub(super) struct Target {
    /// `postgres` or `postgresql`, as the user wrote it.
    pub(super) scheme: String,
    /// `host:port` (or several, comma-separated), without credentials.
    pub(super) authority: String,
    /// Query parameters to hand on to the slice's URL.
    pub(super) query: Vec<String>,
    /// For the connection.
    pub(super) config: Config,
    /// The server, for messages.
    pub(super) server: String,
}

impl Target {
    pub(super) fn parse(url: &str) -> Result<Target> {
        let server = redact(url);
        let scrub = Scrub::new([password_decoded(url).as_deref().unwrap_or("")]);
        let Some(parts) = Url::parse(url) else {
            // Not echoed: without a scheme, redact() cannot find the credentials in it.
            return Err(AdapterError::Config(
                "admin_url is not a URL: write it as postgres://USER:PASSWORD@HOST:5432/postgres"
                    .into(),
            ));
        };
        let scheme = parts.scheme.to_ascii_lowercase();
        if scheme != "postgres" && scheme != "postgresql" {
            return Err(AdapterError::Config(format!(
                "admin_url `{server}` is not a PostgreSQL URL: it must start with postgres://"
            )));
        }
        let authority = parts.host.to_owned();
        let mut kept = Vec::new();
        for pair in parts.query().split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if key == "sslmode" && matches!(value, "require" | "verify-ca" | "verify-full") {
                return Err(AdapterError::Config(format!(
                    "admin_url `{server}` asks for sslmode={value}: TLS to the admin server \
                     is not supported yet; use sslmode=disable (or prefer) on a loopback or \
                     trusted network"
                )));
            }
            if !matches!(key, "user" | "password" | "passfile" | "dbname") {
                kept.push(pair.to_owned());
            }
        }
        let mut config: Config = url.parse().map_err(|e: tokio_postgres::Error| {
            AdapterError::Config(format!(
                "admin_url `{server}` is not a valid PostgreSQL URL: {}",
                scrub.apply(&describe(&e))
            ))
        })?;
        if config.get_user().is_none() {
            return Err(AdapterError::Config(format!(
                "admin_url `{server}` names no user: write it as \
                 postgres://USER:PASSWORD@HOST:5432/postgres"
            )));
        }
        if config.get_dbname().is_none() {
            // libpq would use the user's name, which rarely exists as a database.
            config.dbname("postgres");
        }
        config.connect_timeout(CONNECT_TIMEOUT);
        config.application_name("binky");
        Ok(Target {
            scheme,
            authority,
            query: kept,
            config,
            server,
        })
    }

    pub(super) fn slice_address(&self, slice: &Slice) -> Address {
        let mut url = format!(
            "{}://{}:{}@{}/{}",
            self.scheme,
            percent_encode(&slice.name),
            percent_encode(&slice.secret),
            self.authority,
            percent_encode(&slice.name)
        );
        if !self.query.is_empty() {
            url.push('?');
            url.push_str(&self.query.join("&"));
        }
        let host = match self.config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            // A socket folder: tokio-postgres has this kind of host on Unix only.
            #[cfg(unix)]
            Some(tokio_postgres::config::Host::Unix(p)) => p.to_string_lossy().into_owned(),
            None => "localhost".to_owned(),
        };
        let port = self.config.get_ports().first().copied().unwrap_or(5432);
        let tokens = [
            ("user", slice.name.clone()),
            ("password", slice.secret.clone()),
            ("database", slice.name.clone()),
            ("host", host),
            ("port", port.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        Address { url, tokens }
    }
}

/// What went wrong, in the server's words when it said something.
pub(super) fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = db.message().to_owned();
        if let Some(detail) = db.detail() {
            text.push_str(&format!(" ({detail})"));
        }
        if let Some(hint) = db.hint() {
            text.push_str(&format!("; {hint}"));
        }
        return text;
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

/// Errors worth retrying: the server is going away, starting, short of resources, or the
/// statement ran into a lock or a timeout.
pub(super) fn transient(state: &SqlState) -> bool {
    let code = state.code();
    code.starts_with("08")
        || code.starts_with("40")
        || code.starts_with("53")
        || code.starts_with("57")
        || code == "55006" // object in use (template1 busy during CREATE DATABASE)
        || code == "55P03" // lock not available
}

/// One database's facts.
pub(super) struct Database {
    pub(super) owner: String,
    pub(super) comment: Option<String>,
}

impl Database {
    /// binky made it: owned by the slice role (it is created so, in one statement) or
    /// marked (by any home).
    pub(super) fn ours(&self, name: &str) -> bool {
        self.owner == name || self.mark().is_some()
    }

    /// The maker its binky mark names, if it carries one.
    pub(super) fn mark(&self) -> Option<Maker> {
        self.comment.as_deref().and_then(mark::parse)
    }
}

/// An admin connection.
pub(super) struct Admin {
    pub(super) client: Client,
    pub(super) server: String,
    pub(super) scrub: Scrub,
    pub(super) superuser: bool,
    /// `server_version_num` (150014 for 15.14).
    pub(super) version: i32,
}

impl Admin {
    /// Connect with the admin URL; `secret` is scrubbed from messages too.
    pub(super) async fn connect(cfg: &AdapterConfig, secret: &str) -> Result<Admin> {
        Self::connect_db(cfg, secret, None).await
    }

    /// Connect with the admin's credentials to another database of the server.
    pub(super) async fn connect_to(cfg: &AdapterConfig, secret: &str, db: &str) -> Result<Admin> {
        Self::connect_db(cfg, secret, Some(db)).await
    }

    pub(super) async fn connect_db(
        cfg: &AdapterConfig,
        secret: &str,
        db: Option<&str>,
    ) -> Result<Admin> {
        let url = admin_url(cfg)?;
        let mut target = Target::parse(url)?;
        if let Some(db) = db {
            target.config.dbname(db);
        }
        let admin_password = target
            .config
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_default();
        let raw_password = password_decoded(url).unwrap_or_default();
        let scrub = Scrub::new([admin_password.as_str(), raw_password.as_str(), secret]);
        let server = target.server.clone();
        let unreachable = |detail: String| AdapterError::Unreachable {
            server: server.clone(),
            detail: scrub.apply(&detail),
        };
        let (client, connection) =
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, target.config.connect(NoTls)).await {
                Err(_) => {
                    return Err(unreachable(format!(
                        "no answer within {} s",
                        HANDSHAKE_TIMEOUT.as_secs()
                    )))
                }
                // Refused, timed out, wrong password, no such database, too many
                // connections, starting up: all "not usable yet" for the world.
                Ok(Err(e)) => return Err(unreachable(describe(&e))),
                Ok(Ok(pair)) => pair,
            };
        let log_server = server.clone();
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(server = %log_server, error = %e, "admin connection ended");
            }
        });
        let mut admin = Admin {
            client,
            server,
            scrub,
            superuser: false,
            version: 0,
        };
        admin
            .execute(
                "configuring the session",
                &format!("SET statement_timeout = '{}s'", VERB_TIMEOUT.as_secs()),
            )
            .await?;
        let row = admin
            .client
            .query_one(
                "SELECT rolsuper, current_setting('server_version_num')::int4 \
                 FROM pg_roles WHERE rolname = current_user",
                &[],
            )
            .await
            .map_err(|e| admin.sql_error("reading the admin's rights", &e))?;
        admin.superuser = row
            .try_get(0)
            .map_err(|e| admin.sql_error("reading the admin's rights", &e))?;
        admin.version = row
            .try_get(1)
            .map_err(|e| admin.sql_error("reading the server's version", &e))?;
        Ok(admin)
    }

    /// Run a verb with a bound on how long it may take.
    pub(super) async fn bounded<T>(
        &self,
        verb: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        tokio::time::timeout(VERB_TIMEOUT + Duration::from_secs(5), verb)
            .await
            .unwrap_or_else(|_| {
                Err(AdapterError::Unreachable {
                    server: self.server.clone(),
                    detail: format!("no answer within {} s", VERB_TIMEOUT.as_secs()),
                })
            })
    }

    pub(super) fn sql_error(&self, doing: &str, e: &tokio_postgres::Error) -> AdapterError {
        let detail = self.scrub.apply(&format!("{doing}: {}", describe(e)));
        match e.code() {
            Some(state) if !transient(state) => AdapterError::Server {
                server: self.server.clone(),
                detail,
            },
            // A transient state, or no answer at all (the connection broke).
            _ => AdapterError::Unreachable {
                server: self.server.clone(),
                detail,
            },
        }
    }

    pub(super) async fn execute(&self, doing: &str, sql: &str) -> Result<()> {
        self.client
            .batch_execute(sql)
            .await
            .map_err(|e| self.sql_error(doing, &e))
    }

    /// Run each of `steps` (what it does, its SQL) in order, stopping at the first that
    /// fails.
    pub(super) async fn execute_each(&self, steps: &[(&str, String)]) -> Result<()> {
        for (doing, sql) in steps {
            self.execute(doing, sql).await?;
        }
        Ok(())
    }

    /// Run `sql`; `Ok(false)` when the server answers with `benign` instead.
    pub(super) async fn execute_unless(
        &self,
        doing: &str,
        sql: &str,
        benign: &SqlState,
    ) -> Result<bool> {
        match self.client.batch_execute(sql).await {
            Ok(()) => Ok(true),
            Err(e) if e.code() == Some(benign) => Ok(false),
            Err(e) => Err(self.sql_error(doing, &e)),
        }
    }

    pub(super) async fn exists(&self, sql: &str, name: &str, doing: &str) -> Result<bool> {
        self.client
            .query_opt(sql, &[&name])
            .await
            .map(|row| row.is_some())
            .map_err(|e| self.sql_error(doing, &e))
    }

    /// The role `name`'s comment: `None` without such a role, `Some(None)` for one without
    /// a comment.
    pub(super) async fn role_comment(&self, name: &str) -> Result<Option<Option<String>>> {
        let doing = "looking up the role";
        let row = self
            .client
            .query_opt(
                "SELECT shobj_description(r.oid, 'pg_authid') FROM pg_roles r WHERE r.rolname = $1",
                &[&name],
            )
            .await
            .map_err(|e| self.sql_error(doing, &e))?;
        row.map(|r| r.try_get(0).map_err(|e| self.sql_error(doing, &e)))
            .transpose()
    }

    /// Which home the slice `name`'s database and role say made it: a home either names,
    /// else unmarked when either is there, else absent.
    pub(super) async fn maker(&self, name: &str) -> Result<Maker> {
        let db = self.database(name).await?;
        let role = self.role_comment(name).await?;
        let marks = [
            db.as_ref().and_then(Database::mark),
            role.clone().flatten().as_deref().and_then(mark::parse),
        ];
        if let Some(home) = marks.iter().flatten().find(|m| matches!(m, Maker::Home(_))) {
            return Ok(home.clone());
        }
        Ok(if db.is_some() || role.is_some() {
            Maker::Unmarked
        } else {
            Maker::Absent
        })
    }

    /// Is there a role `name`?
    pub(super) async fn role_exists(&self, name: &str) -> Result<bool> {
        self.exists(
            "SELECT 1 FROM pg_roles WHERE rolname = $1",
            name,
            "looking up the role",
        )
        .await
    }

    pub(super) async fn database(&self, name: &str) -> Result<Option<Database>> {
        let doing = "looking up the database";
        let row = self
            .client
            .query_opt(
                "SELECT pg_get_userbyid(d.datdba)::text, shobj_description(d.oid, 'pg_database') \
                 FROM pg_database d WHERE d.datname = $1",
                &[&name],
            )
            .await
            .map_err(|e| self.sql_error(doing, &e))?;
        row.map(|r| {
            Ok(Database {
                owner: r.try_get(0).map_err(|e| self.sql_error(doing, &e))?,
                comment: r.try_get(1).map_err(|e| self.sql_error(doing, &e))?,
            })
        })
        .transpose()
    }

    /// End every session in the slice's database or logged in as its role.
    pub(super) async fn terminate(&self, name: &str) -> Result<()> {
        self.client
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE (datname = $1 OR usename = $1) AND pid <> pg_backend_pid()",
                &[&name],
            )
            .await
            .map(|_| ())
            .map_err(|e| self.sql_error("ending the slice's sessions", &e))
    }
}
