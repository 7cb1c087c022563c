//! The admin URL, understood, the admin connection, and how its errors are classified.

use super::*;

/// The admin URL, understood.
#[derive(Clone, Debug)]
pub struct Target {
    /// The admin URL as given.
    pub(super) url: String,
    /// `host:port[,host:port]` as written, without credentials.
    pub hosts: String,
    /// Query parameters handed on to the slice's URL, as written.
    pub options: Vec<String>,
    /// `mongodb://hosts`, for messages.
    pub shown: String,
    /// Strings that must never appear in a message.
    pub(super) secrets: Vec<String>,
}

impl Target {
    /// The target of `cfg`: its `admin_url`, else `$BINKY_MONGO_URL`.
    pub fn from_config(cfg: &AdapterConfig) -> Result<Target> {
        let url = cfg.admin_url_else_env(
            ENV_URL,
            &format!(
                "the mongodb adapter needs the server's admin address: set `admin_url = \
                 \"mongodb://USER:PASSWORD@HOST:27017\"` on the service in binky.toml (a user \
                 that may create users and databases), or ${ENV_URL} in the daemon's \
                 environment"
            ),
        )?;
        Target::parse(&url)
    }

    /// The target of `cfg` and a client for it: what every verb that talks to the server
    /// starts with.
    pub(super) async fn connect(cfg: &AdapterConfig) -> Result<(Target, Client)> {
        let target = Target::from_config(cfg)?;
        let client = target.client().await?;
        Ok((target, client))
    }

    /// `mongodb://user:pw@h1:27017,h2/?replicaSet=rs0&tls=true`.
    pub fn parse(url: &str) -> Result<Target> {
        let Some(parts) = Url::parse(url) else {
            // Not echoed: without a scheme, redact() cannot find the credentials in it.
            return Err(AdapterError::Config(
                "admin_url is not a URL: write it as mongodb://USER:PASSWORD@HOST:27017".into(),
            ));
        };
        let shown = redact(url);
        match parts.scheme.to_ascii_lowercase().as_str() {
            "mongodb" => {}
            "mongodb+srv" => {
                return Err(AdapterError::Config(format!(
                    "admin_url `{shown}`: mongodb+srv:// addresses need DNS SRV and TXT \
                     lookups, which binky is built without (the mongodb crate's \
                     `dns-resolver` feature): write the hosts out instead, \
                     mongodb://USER:PASSWORD@HOST1:27017,HOST2:27017/?replicaSet=NAME&tls=true"
                )))
            }
            other => {
                return Err(AdapterError::Config(format!(
                    "admin_url `{shown}`: `{other}://` is not a MongoDB address; write it as \
                     mongodb://USER:PASSWORD@HOST:27017"
                )))
            }
        }
        let mut secrets: Vec<String> = Vec::new();
        if let Some(pw) = password_decoded(url) {
            secrets.push(pw);
        }
        if let Some(raw) = parts.password() {
            secrets.push(raw.to_owned());
        }
        let hosts = parts.host.to_owned();
        if hosts.is_empty() || hosts.split(',').any(|h| h.trim().is_empty()) {
            return Err(AdapterError::Config(format!(
                "admin_url `{shown}` names no host (or an empty one): write it as \
                 mongodb://USER:PASSWORD@HOST:27017"
            )));
        }
        let options = parts
            .query()
            .split(['&', ';'])
            .filter(|p| !p.is_empty())
            .filter(|p| {
                let key = p.split('=').next().unwrap_or("").to_ascii_lowercase();
                !AUTH_OPTIONS.contains(&key.as_str())
            })
            .map(str::to_owned)
            .collect();
        let target = Target {
            url: url.to_owned(),
            hosts,
            options,
            shown,
            secrets,
        };
        // The driver's own check: options it would refuse are refused now, with its words.
        ::mongodb::options::ConnectionString::parse(url).map_err(|e| {
            AdapterError::Config(format!(
                "admin_url `{}` is not a valid MongoDB URL: {}",
                target.shown,
                target.scrub(&describe(&e), &[])
            ))
        })?;
        Ok(target)
    }

    /// The slice's address: its own user and database, the admin URL's hosts and options.
    pub fn slice_url(&self, user: &str, db: &str, secret: &str) -> String {
        let mut url = format!(
            "mongodb://{}:{}@{}/{}?authSource={}",
            percent_encode(user),
            percent_encode(secret),
            self.hosts,
            db,
            db
        );
        for o in &self.options {
            url.push('&');
            url.push_str(o);
        }
        url
    }

    /// `text` without any secret (`extra`: the slice's).
    pub(super) fn scrub(&self, text: &str, extra: &[&str]) -> String {
        crate::adapters::scrub_with(text, &self.secrets, extra)
    }

    /// An admin client with short timeouts (it connects on its first command).
    pub(super) async fn client(&self) -> Result<Client> {
        let mut options = ClientOptions::parse(&self.url).await.map_err(|e| {
            AdapterError::Config(format!(
                "admin_url `{}` is not a valid MongoDB URL: {}",
                self.shown,
                self.scrub(&describe(&e), &[])
            ))
        })?;
        options.server_selection_timeout = Some(SERVER_TIMEOUT);
        options.connect_timeout = Some(SERVER_TIMEOUT);
        options.app_name = Some("binky".into());
        Client::with_options(options).map_err(|e| self.error("creating the client", &e, &[]))
    }

    /// A driver error as an adapter error: unreachable (worth retrying) or not.
    pub(super) fn error(&self, doing: &str, e: &MongoError, extra: &[&str]) -> AdapterError {
        let server = self.shown.clone();
        let text = self.scrub(&describe(e), extra);
        match classify(e) {
            Class::Unreachable => AdapterError::Unreachable {
                server,
                detail: format!("{doing}: {text}"),
            },
            Class::AdminRefused => AdapterError::Unreachable {
                server,
                detail: format!(
                    "{doing}: the server refused admin_url's credentials ({text}); check the \
                     user and password in admin_url"
                ),
            },
            Class::Unauthorized => AdapterError::Server {
                server,
                detail: format!(
                    "{doing}: {text}; admin_url's user needs the roles root, or \
                     userAdminAnyDatabase + readWriteAnyDatabase + dbAdminAnyDatabase"
                ),
            },
            Class::Config => AdapterError::Config(format!("{server}: {doing}: {text}")),
            Class::Server => AdapterError::Server {
                server,
                detail: format!("{doing}: {text}"),
            },
        }
    }

    /// Run a verb within `limit`.
    pub(super) async fn bounded<T>(
        &self,
        limit: Duration,
        verb: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        bounded(&self.shown, limit, verb).await
    }

    /// Run `cmd` in `db`.
    pub(super) async fn run(
        &self,
        db: &Database,
        doing: &str,
        cmd: Document,
        extra: &[&str],
    ) -> Result<Document> {
        db.run_command(cmd)
            .await
            .map_err(|e| self.error(doing, &e, extra))
    }

    /// Every document of the cursor `cmd` opens in `db` (following `getMore`).
    pub(super) async fn cursor(
        &self,
        db: &Database,
        doing: &str,
        cmd: Document,
    ) -> Result<Vec<Document>> {
        let mut cursor = db
            .run_cursor_command(cmd)
            .await
            .map_err(|e| self.error(doing, &e, &[]))?;
        let mut out = Vec::new();
        while cursor
            .advance()
            .await
            .map_err(|e| self.error(doing, &e, &[]))?
        {
            out.push(
                cursor
                    .deserialize_current()
                    .map_err(|e| self.error(doing, &e, &[]))?,
            );
        }
        Ok(out)
    }

    /// The slice's user with its password and roles (created, or healed).
    pub(super) async fn ensure_user(
        &self,
        client: &Client,
        name: &str,
        secret: &str,
    ) -> Result<()> {
        let db = client.database(name);
        match db
            .run_command(create_user_command(name, name, secret))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if command_code(&e).is_some_and(|c| USER_EXISTS.contains(&c)) => self
                .run(
                    &db,
                    &format!("setting the password of user {name}"),
                    update_user_command(name, name, secret),
                    &[secret],
                )
                .await
                .map(|_| ()),
            Err(e) => Err(self.error(&format!("creating user {name}"), &e, &[secret])),
        }
    }

    /// Does database `name` exist (is it listed)?
    /// Which home the marker of the slice's database `name` names (see [`maker_of`]).
    pub(super) async fn maker(&self, client: &Client, name: &str) -> Result<Maker> {
        let marker = client
            .database(name)
            .collection::<Document>(MARKER)
            .find_one(doc! { "_id": "binky" })
            .await
            .map_err(|e| self.error(&format!("reading the marker of {name}"), &e, &[]))?;
        let exists = marker.is_some() || self.database_exists(client, name).await?;
        Ok(maker_of(marker.as_ref(), exists))
    }

    pub(super) async fn database_exists(&self, client: &Client, name: &str) -> Result<bool> {
        let names = client
            .list_database_names()
            .filter(doc! { "name": name })
            .await
            .map_err(|e| self.error("listing databases", &e, &[]))?;
        Ok(names.iter().any(|n| n == name))
    }

    /// Drop every user and role defined in database `name`, then the database.
    pub(super) async fn drop_slice(&self, client: &Client, name: &str) -> Result<()> {
        let db = client.database(name);
        // Users first: nothing authenticates as the world while its data goes.
        self.run(
            &db,
            &format!("dropping the users of {name}"),
            drop_all_users_command(),
            &[],
        )
        .await?;
        self.run(
            &db,
            &format!("dropping the roles of {name}"),
            drop_all_roles_command(),
            &[],
        )
        .await?;
        db.drop()
            .await
            .map_err(|e| self.error(&format!("dropping database {name}"), &e, &[]))
    }

    /// Copy every collection and view of `from` into `to`, with indexes.
    pub(super) async fn copy(&self, client: &Client, from: &str, to: &str) -> Result<()> {
        let src = client.database(from);
        let dst = client.database(to);
        let mut entries = self
            .cursor(
                &src,
                &format!("listing the collections of {from}"),
                doc! { "listCollections": 1 },
            )
            .await?;
        entries.retain(|e| {
            !e.get_str("name")
                .unwrap_or("system.")
                .starts_with("system.")
        });
        // Collections before views: a view's source must exist for it to be useful.
        entries.sort_by_key(|e| {
            (
                e.get_str("type").unwrap_or("collection") == "view",
                e.get_str("name").unwrap_or("").to_owned(),
            )
        });
        let server_refused = |detail: String| AdapterError::Server {
            server: self.shown.clone(),
            detail: format!("copying {from} into {to}: {detail}"),
        };
        for info in &entries {
            let name = info
                .get_str("name")
                .map_err(|_| server_refused("a collection without a name".into()))?;
            let create = create_command(info).map_err(server_refused)?;
            if let Some(cmd) = create {
                match dst.run_command(cmd).await {
                    Ok(_) => {}
                    Err(e) if command_code(&e) == Some(NAMESPACE_EXISTS) => {}
                    Err(e) => return Err(self.error(&format!("creating {to}.{name}"), &e, &[])),
                }
            }
            if info.get_str("type").unwrap_or("collection") == "view" {
                continue;
            }
            self.run(
                &src,
                &format!("copying {from}.{name} into {to}"),
                copy_command(name, to),
                &[],
            )
            .await?;
            let indexes: Vec<Document> = self
                .cursor(
                    &src,
                    &format!("listing the indexes of {from}.{name}"),
                    doc! { "listIndexes": name },
                )
                .await?
                .iter()
                .filter_map(index_spec)
                .collect();
            if !indexes.is_empty() {
                self.run(
                    &dst,
                    &format!("creating the indexes of {to}.{name}"),
                    create_indexes_command(name, indexes),
                    &[],
                )
                .await?;
            }
        }
        Ok(())
    }
}

/// How an error is to be taken.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Class {
    Unreachable,
    AdminRefused,
    Unauthorized,
    Config,
    Server,
}

pub(super) fn command_code(e: &MongoError) -> Option<i32> {
    match e.kind.as_ref() {
        ErrorKind::Command(c) => Some(c.code),
        ErrorKind::Write(::mongodb::error::WriteFailure::WriteError(w)) => Some(w.code),
        _ => None,
    }
}

pub(super) fn classify(e: &MongoError) -> Class {
    if e.contains_label("RetryableWriteError") || e.contains_label("TransientTransactionError") {
        return Class::Unreachable;
    }
    match e.kind.as_ref() {
        ErrorKind::ServerSelection { .. }
        | ErrorKind::Io(_)
        | ErrorKind::ConnectionPoolCleared { .. }
        | ErrorKind::DnsResolve { .. }
        | ErrorKind::InvalidResponse { .. }
        | ErrorKind::Shutdown => Class::Unreachable,
        ErrorKind::Authentication { .. } => Class::AdminRefused,
        ErrorKind::InvalidArgument { .. } | ErrorKind::InvalidTlsConfig { .. } => Class::Config,
        _ => match command_code(e) {
            Some(c) if TRANSIENT_CODES.contains(&c) => Class::Unreachable,
            Some(UNAUTHORIZED) => Class::Unauthorized,
            _ => Class::Server,
        },
    }
}

/// What went wrong, with its causes.
pub(super) fn describe(e: &MongoError) -> String {
    super::super::with_sources(e.kind.to_string(), std::error::Error::source(e))
}
