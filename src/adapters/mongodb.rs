//! The `mongodb` adapter: each slice is one database and one user of its own, defined in
//! that database, on a shared MongoDB server.
//!
//! **Not run against a real MongoDB server**: none can be installed on the machines binky
//! is built on. The unit tests below check name derivation, the slice URL, the exact
//! command documents sent, and the error paths against a closed port and a TCP listener
//! that answers garbage; the server's side of every command is as MongoDB documents it.
//!
//! # What a slice is
//! - A database named after the slice (`bk_acme_login_fix_db`), holding binky 0.1.2's
//!   marker: collection `__binky`, document `{_id: "binky", managed: true}`. MongoDB creates
//!   databases lazily; the marker makes an empty slice exist (and be listed).
//! - A user of the same name, defined in that database, with the slice's secret as its
//!   password and the roles `readWrite` and `dbAdmin` on that database only. The server
//!   enforces the isolation: another world's user cannot read, write or list this database.
//!
//! `${db.url}` is `mongodb://<user>:<secret>@<hosts>/<db>?authSource=<db>&<the admin URL's
//! other options>`; tokens: `database`, `user`.
//!
//! `admin_url` is `mongodb://USER:PASSWORD@HOST:27017[,HOST2:27017][/?options]`, a user
//! that may create users and databases (`root`, or `userAdminAnyDatabase` with
//! `readWriteAnyDatabase` and `dbAdminAnyDatabase`); without it, `$BINKY_MONGO_URL` (of the
//! daemon's environment) is used, as in binky 0.1.2.
//!
//! # Guarantees
//! - Every verb is idempotent. `provision` creates the user or, when it exists, sets its
//!   password and roles again (`updateUser`), which heals drift; the marker is an upsert.
//! - `teardown` drops every user and role defined in the slice's database (the slice's
//!   own and any a world made), then the database; what is already gone is fine.
//! - A server that is down, silent or refusing the admin credentials gives
//!   [`AdapterError::Unreachable`] within seconds (5 s server selection and connect
//!   timeouts); a command error gives [`AdapterError::Server`]. No message carries the
//!   admin password or a slice's secret.
//!
//! # Decisions
//! - **Roles `readWrite` + `dbAdmin`, not `dbOwner`.** `dbOwner` adds `userAdmin`, with
//!   which a world could create users and roles in its database; nothing an application
//!   needs, and they would be more to clean up. (Teardown drops them all anyway.)
//! - **The slice URL keeps the admin URL's options** (`replicaSet`, `tls`, `tlsCAFile`,
//!   `directConnection`, …) except those about authentication (`authSource`,
//!   `authMechanism`, `authMechanismProperties`): the slice user authenticates in its own
//!   database with SCRAM, whatever mechanism the admin uses.
//! - **clone** is server-side: each collection of the template is copied with an
//!   aggregation ending in `$out` into the new database (no document passes through
//!   binky), after creating the collection with the template's options (validator,
//!   collation, …); then its indexes are re-created from `listIndexes` (skipping `_id_`).
//!   Views are re-created from their definition. `$out` into another database needs
//!   MongoDB 4.4 or newer. A half-made copy from an earlier attempt is dropped first.
//! - **seal_template** takes the template user's write roles away (it keeps `read` on the
//!   template): nothing may change a golden template after its seed, and the copies are
//!   made by the admin. Provisioning the template again gives them back.
//!
//! # Caveats
//! - `mongodb+srv://` addresses are refused: binky is built without the DNS resolver they
//!   need. Write the hosts out (`mongodb://h1:27017,h2:27017/?replicaSet=rs0&tls=true`).
//! - The password goes to the server inside `createUser`/`updateUser` (MongoDB digests it
//!   server-side for SCRAM-SHA-256; there is no client-side verifier as in PostgreSQL): use
//!   `tls=true` on a network that is not trusted.
//! - Capped and time-series collections cannot be copied with `$out`: a template holding
//!   one makes `clone` fail (binky then provisions, migrates and seeds instead).
//! - Database names are at most 63 bytes without `/\. "$*<>:|?`: a slice name is mapped as
//!   binky 0.1.2 did (forbidden characters to `_`, shortened with a hash suffix).

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use ::mongodb::bson::{doc, Bson, Document};
use ::mongodb::error::{Error as MongoError, ErrorKind};
use ::mongodb::options::ClientOptions;
use ::mongodb::{Client, Database};
use binky_controllers::url::{password_decoded, percent_encode, Url};

use super::{
    fit_name, redact, Adapter, AdapterConfig, AdapterError, Address, BoxFuture, Capabilities, Slice,
};

/// The environment variable read when a service has no `admin_url` (binky 0.1.2's).
pub const ENV_URL: &str = "BINKY_MONGO_URL";
/// The marker collection of binky 0.1.2.
pub const MARKER: &str = "__binky";
/// MongoDB's limit on a database name, in bytes (binky 0.1.2's figure).
pub const MAX_DB_NAME: usize = 63;
/// Characters MongoDB refuses in a database name.
const FORBIDDEN: &[char] = &['/', '\\', '.', ' ', '"', '$', '*', '<', '>', ':', '|', '?'];
/// Server selection and TCP connect: how long a server that is down takes to be noticed.
const SERVER_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on provision, teardown, list, exists and seal.
const VERB_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on a clone (it copies every document of the template, server-side).
const CLONE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Options of the admin URL that are about its own authentication, not the server.
const AUTH_OPTIONS: &[&str] = &["authsource", "authmechanism", "authmechanismproperties"];
/// Index fields that describe an index, not how to build one.
const INDEX_NOT_CARRIED: &[&str] = &["v", "ns", "background"];
/// Error codes worth retrying: the server is stepping down, shutting down or busy.
const TRANSIENT_CODES: &[i32] = &[
    6,     // HostUnreachable
    7,     // HostNotFound
    89,    // NetworkTimeout
    91,    // ShutdownInProgress
    189,   // PrimarySteppedDown
    262,   // ExceededTimeLimit
    9001,  // SocketException
    10107, // NotWritablePrimary
    11600, // InterruptedAtShutdown
    11602, // InterruptedDueToReplStateChange
    13435, // NotPrimaryNoSecondaryOk
    13436, // NotPrimaryOrSecondary
];
/// `createUser` for a user that exists (`Location51003`; `DuplicateKey` before 4.4).
const USER_EXISTS: &[i32] = &[51003, 11000];
/// `UserNotFound`.
const USER_NOT_FOUND: i32 = 11;
/// `NamespaceExists`.
const NAMESPACE_EXISTS: i32 = 48;
/// `Unauthorized`.
const UNAUTHORIZED: i32 = 13;

/// The mongodb adapter.
pub struct Mongo;

/// The database (and user) name of a slice: binky 0.1.2's mapping, forbidden characters
/// to `_`, shortened to [`MAX_DB_NAME`] bytes with a hash suffix.
pub fn database_name(slice: &str) -> Result<String, AdapterError> {
    let mapped: String = slice
        .chars()
        .map(|c| {
            if FORBIDDEN.contains(&c) || c == '\0' {
                '_'
            } else {
                c
            }
        })
        .collect();
    if mapped.is_empty() || !mapped.is_ascii() {
        return Err(AdapterError::Config(format!(
            "slice name `{slice}` cannot name a MongoDB database: 1 to {MAX_DB_NAME} ASCII \
             characters"
        )));
    }
    Ok(fit_name(&mapped, MAX_DB_NAME))
}

/// Is `name` a database name MongoDB takes?
pub fn valid_database_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_DB_NAME
        && !name.contains(FORBIDDEN)
        && !name.contains('\0')
}

/// `createUser`: the slice's user, in its database, with its secret and roles.
pub fn create_user_command(user: &str, db: &str, secret: &str) -> Document {
    doc! { "createUser": user, "pwd": secret, "roles": slice_roles(db) }
}

/// `updateUser`: the password and roles set again (an existing user, healed).
pub fn update_user_command(user: &str, db: &str, secret: &str) -> Document {
    doc! { "updateUser": user, "pwd": secret, "roles": slice_roles(db) }
}

/// `dropUser` (teardown uses [`drop_all_users_command`], which also takes users a world
/// made itself; this one is for a single user).
pub fn drop_user_command(user: &str) -> Document {
    doc! { "dropUser": user }
}

/// Every user defined in the database the command runs in.
pub fn drop_all_users_command() -> Document {
    doc! { "dropAllUsersFromDatabase": 1 }
}

/// Every user-defined role of the database the command runs in.
pub fn drop_all_roles_command() -> Document {
    doc! { "dropAllRolesFromDatabase": 1 }
}

/// The template user keeps `read` only.
pub fn seal_command(user: &str, db: &str) -> Document {
    doc! { "updateUser": user, "roles": [ { "role": "read", "db": db } ] }
}

/// The roles of a slice user: read, write and administer its own database.
fn slice_roles(db: &str) -> Bson {
    Bson::Array(vec![
        Bson::Document(doc! { "role": "readWrite", "db": db }),
        Bson::Document(doc! { "role": "dbAdmin", "db": db }),
    ])
}

/// The aggregation copying collection `coll` into database `to`, server-side (run in the
/// template's database).
pub fn copy_command(coll: &str, to: &str) -> Document {
    doc! {
        "aggregate": coll,
        "pipeline": [ { "$out": { "db": to, "coll": coll } } ],
        "cursor": {},
        // A faithful copy, even of documents older than the collection's validator.
        "bypassDocumentValidation": true,
    }
}

/// `create` for a copy of the collection or view described by a `listCollections` entry;
/// `None` when there is nothing to say beyond what `$out` does (a plain collection).
pub fn create_command(info: &Document) -> Result<Option<Document>, String> {
    let name = info
        .get_str("name")
        .map_err(|_| "an entry without a name".to_owned())?;
    let kind = info.get_str("type").unwrap_or("collection");
    let options = info.get_document("options").cloned().unwrap_or_default();
    match kind {
        "collection" => {
            if options.get_bool("capped").unwrap_or(false) {
                return Err(format!(
                    "collection `{name}` is capped, which $out cannot copy"
                ));
            }
            if options.is_empty() {
                return Ok(None);
            }
            let mut cmd = doc! { "create": name };
            cmd.extend(options);
            Ok(Some(cmd))
        }
        "view" => {
            let mut cmd = doc! { "create": name };
            cmd.extend(options);
            Ok(Some(cmd))
        }
        other => Err(format!(
            "`{name}` is a {other} collection, which $out cannot copy"
        )),
    }
}

/// The index of a `listIndexes` entry as `createIndexes` takes it; `None` for `_id_`, which
/// every collection has.
pub fn index_spec(index: &Document) -> Option<Document> {
    if index.get_str("name").ok()? == "_id_" {
        return None;
    }
    let mut spec = index.clone();
    for k in INDEX_NOT_CARRIED {
        spec.remove(*k);
    }
    Some(spec)
}

/// `createIndexes` for collection `coll`.
pub fn create_indexes_command(coll: &str, indexes: Vec<Document>) -> Document {
    doc! { "createIndexes": coll, "indexes": indexes }
}

/// The admin URL, understood.
#[derive(Clone, Debug)]
pub struct Target {
    /// The admin URL as given.
    url: String,
    /// `host:port[,host:port]` as written, without credentials.
    pub hosts: String,
    /// Query parameters handed on to the slice's URL, as written.
    pub options: Vec<String>,
    /// `mongodb://hosts`, for messages.
    pub shown: String,
    /// Strings that must never appear in a message.
    secrets: Vec<String>,
}

impl Target {
    /// The target of `cfg`: its `admin_url`, else `$BINKY_MONGO_URL`.
    pub fn from_config(cfg: &AdapterConfig) -> Result<Target, AdapterError> {
        let env = std::env::var(ENV_URL).ok().filter(|u| !u.trim().is_empty());
        match cfg.admin_url.as_deref().or(env.as_deref()) {
            Some(url) => Target::parse(url),
            None => Err(AdapterError::Config(format!(
                "the mongodb adapter needs the server's admin address: set `admin_url = \
                 \"mongodb://USER:PASSWORD@HOST:27017\"` on the service in binky.toml (a user \
                 that may create users and databases), or ${ENV_URL} in the daemon's \
                 environment"
            ))),
        }
    }

    /// `mongodb://user:pw@h1:27017,h2/?replicaSet=rs0&tls=true`.
    pub fn parse(url: &str) -> Result<Target, AdapterError> {
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
    fn scrub(&self, text: &str, extra: &[&str]) -> String {
        super::scrub(
            text,
            self.secrets
                .iter()
                .map(String::as_str)
                .chain(extra.iter().copied()),
        )
    }

    /// An admin client with short timeouts (it connects on its first command).
    async fn client(&self) -> Result<Client, AdapterError> {
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
    fn error(&self, doing: &str, e: &MongoError, extra: &[&str]) -> AdapterError {
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
    async fn bounded<T>(
        &self,
        limit: Duration,
        verb: impl Future<Output = Result<T, AdapterError>>,
    ) -> Result<T, AdapterError> {
        tokio::time::timeout(limit, verb).await.unwrap_or_else(|_| {
            Err(AdapterError::Unreachable {
                server: self.shown.clone(),
                detail: format!("no answer within {} s", limit.as_secs()),
            })
        })
    }

    /// Run `cmd` in `db`.
    async fn run(
        &self,
        db: &Database,
        doing: &str,
        cmd: Document,
        extra: &[&str],
    ) -> Result<Document, AdapterError> {
        db.run_command(cmd)
            .await
            .map_err(|e| self.error(doing, &e, extra))
    }

    /// Every document of the cursor `cmd` opens in `db` (following `getMore`).
    async fn cursor(
        &self,
        db: &Database,
        doing: &str,
        cmd: Document,
    ) -> Result<Vec<Document>, AdapterError> {
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
    async fn ensure_user(
        &self,
        client: &Client,
        name: &str,
        secret: &str,
    ) -> Result<(), AdapterError> {
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
    async fn database_exists(&self, client: &Client, name: &str) -> Result<bool, AdapterError> {
        let names = client
            .list_database_names()
            .filter(doc! { "name": name })
            .await
            .map_err(|e| self.error("listing databases", &e, &[]))?;
        Ok(names.iter().any(|n| n == name))
    }

    /// Drop every user and role defined in database `name`, then the database.
    async fn drop_slice(&self, client: &Client, name: &str) -> Result<(), AdapterError> {
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
    async fn copy(&self, client: &Client, from: &str, to: &str) -> Result<(), AdapterError> {
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
enum Class {
    Unreachable,
    AdminRefused,
    Unauthorized,
    Config,
    Server,
}

fn command_code(e: &MongoError) -> Option<i32> {
    match e.kind.as_ref() {
        ErrorKind::Command(c) => Some(c.code),
        ErrorKind::Write(::mongodb::error::WriteFailure::WriteError(w)) => Some(w.code),
        _ => None,
    }
}

fn classify(e: &MongoError) -> Class {
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
fn describe(e: &MongoError) -> String {
    let mut text = e.kind.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(&format!(": {s_text}"));
        }
        source = s.source();
    }
    text
}

/// The slice's database name, checked.
fn slice_db(slice: &Slice) -> Result<String, AdapterError> {
    let name = database_name(&slice.name)?;
    debug_assert!(valid_database_name(&name));
    Ok(name)
}

fn check_secret(slice: &Slice) -> Result<(), AdapterError> {
    if slice.secret.is_empty() {
        return Err(AdapterError::Config(format!(
            "the secret of slice `{}` is empty, which MongoDB cannot take as a password",
            slice.name
        )));
    }
    Ok(())
}

impl Adapter for Mongo {
    fn names(&self) -> &'static [&'static str] {
        &["mongodb"]
    }

    fn capabilities<'a>(
        &'a self,
        _cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Capabilities, AdapterError>> {
        // `$out` into another database: a server-side copy of a golden template.
        Box::pin(async { Ok(Capabilities { clone: true }) })
    }

    fn provision<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<(), AdapterError>> {
        Box::pin(async move {
            let name = slice_db(slice)?;
            check_secret(slice)?;
            let target = Target::from_config(cfg)?;
            let client = target.client().await?;
            target
                .bounded(VERB_TIMEOUT, async {
                    target.ensure_user(&client, &name, &slice.secret).await?;
                    client
                        .database(&name)
                        .collection::<Document>(MARKER)
                        .update_one(
                            doc! { "_id": "binky" },
                            doc! { "$set": { "managed": true } },
                        )
                        .upsert(true)
                        .await
                        .map_err(|e| target.error(&format!("marking database {name}"), &e, &[]))?;
                    Ok(())
                })
                .await
        })
    }

    fn resolve<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Address, AdapterError>> {
        Box::pin(async move {
            let name = slice_db(slice)?;
            let target = Target::from_config(cfg)?;
            Ok(Address {
                url: target.slice_url(&name, &name, &slice.secret),
                tokens: BTreeMap::from([
                    ("database".to_owned(), name.clone()),
                    ("user".to_owned(), name),
                ]),
            })
        })
    }

    fn teardown<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<(), AdapterError>> {
        Box::pin(async move {
            let name = slice_db(slice)?;
            let target = Target::from_config(cfg)?;
            let client = target.client().await?;
            target
                .bounded(VERB_TIMEOUT, target.drop_slice(&client, &name))
                .await
        })
    }

    fn list<'a>(
        &'a self,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Vec<String>, AdapterError>> {
        Box::pin(async move {
            let target = Target::from_config(cfg)?;
            let client = target.client().await?;
            target
                .bounded(VERB_TIMEOUT, async {
                    let mut names = client
                        .list_database_names()
                        .filter(doc! { "name": { "$regex": "^bk_" } })
                        .await
                        .map_err(|e| target.error("listing databases", &e, &[]))?;
                    names.retain(|n| n.starts_with("bk_"));
                    names.sort();
                    Ok(names)
                })
                .await
        })
    }

    fn exists<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Option<bool>, AdapterError>> {
        Box::pin(async move {
            let name = slice_db(slice)?;
            let target = Target::from_config(cfg)?;
            let client = target.client().await?;
            target
                .bounded(VERB_TIMEOUT, target.database_exists(&client, &name))
                .await
                .map(Some)
        })
    }

    fn clone_slice<'a>(
        &'a self,
        from: &'a Slice,
        to: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<(), AdapterError>> {
        Box::pin(async move {
            let src = slice_db(from)?;
            let dst = slice_db(to)?;
            check_secret(to)?;
            let target = Target::from_config(cfg)?;
            let client = target.client().await?;
            target
                .bounded(CLONE_TIMEOUT, async {
                    if !target.database_exists(&client, &src).await? {
                        return Err(AdapterError::Server {
                            server: target.shown.clone(),
                            detail: format!("the template database {src} does not exist"),
                        });
                    }
                    // A copy left half-made by an earlier attempt is redone from scratch.
                    target.drop_slice(&client, &dst).await?;
                    target.copy(&client, &src, &dst).await?;
                    target.ensure_user(&client, &dst, &to.secret).await
                })
                .await
        })
    }

    fn seal_template<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<(), AdapterError>> {
        Box::pin(async move {
            let name = slice_db(slice)?;
            let target = Target::from_config(cfg)?;
            let client = target.client().await?;
            target
                .bounded(VERB_TIMEOUT, async {
                    match client
                        .database(&name)
                        .run_command(seal_command(&name, &name))
                        .await
                    {
                        Ok(_) => Ok(()),
                        Err(e) if command_code(&e) == Some(USER_NOT_FOUND) => Ok(()),
                        Err(e) => Err(target.error(&format!("sealing template {name}"), &e, &[])),
                    }
                })
                .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::time::Instant;

    fn slice(name: &str, secret: &str) -> Slice {
        Slice {
            name: name.into(),
            secret: secret.into(),
        }
    }

    fn cfg(url: &str) -> AdapterConfig {
        AdapterConfig {
            admin_url: Some(url.into()),
            ..AdapterConfig::default()
        }
    }

    fn block<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(f)
    }

    #[test]
    fn database_names_are_0_1_2s_within_mongodbs_limits() {
        assert_eq!(
            database_name("bk_acme_login_fix_db").expect("valid"),
            "bk_acme_login_fix_db"
        );
        assert_eq!(database_name("bk_a.b/c d$").expect("mapped"), "bk_a_b_c_d_");
        let long = format!("bk_{}_db", "p".repeat(80));
        let fitted = database_name(&long).expect("fitted");
        assert_eq!(fitted.len(), MAX_DB_NAME, "{fitted}");
        assert!(valid_database_name(&fitted));
        assert_ne!(
            fitted,
            database_name(&format!("bk_{}_dc", "p".repeat(80))).expect("x")
        );
        assert!(database_name("").is_err());
        assert!(database_name("bk_é").is_err());
        for bad in [
            "", "a.b", "a b", "a$", "a/b", "a\\b", "a\"b", "a*", "a<", "a>", "a:", "a|", "a?",
        ] {
            assert!(!valid_database_name(bad), "{bad}");
        }
        assert!(!valid_database_name(&"x".repeat(64)));
        assert!(valid_database_name(&"x".repeat(63)));
    }

    #[test]
    fn the_slice_url_keeps_hosts_and_options_and_replaces_credentials() {
        let t = Target::parse(
            "mongodb://root:s3cret@h1:27017,h2:27018/admin?replicaSet=rs0&authSource=admin\
             &tls=true&authMechanism=SCRAM-SHA-1&retryWrites=false",
        )
        .expect("parses");
        let url = t.slice_url("bk_w_db", "bk_w_db", "pw");
        assert_eq!(
            url,
            "mongodb://bk_w_db:pw@h1:27017,h2:27018/bk_w_db?authSource=bk_w_db\
             &replicaSet=rs0&tls=true&retryWrites=false"
        );
        assert!(!url.contains("root") && !url.contains("s3cret"), "{url}");
        // Options are matched without regard to case, as MongoDB does.
        let t = Target::parse("mongodb://u:p@h/?AUTHSOURCE=admin&appName=x").expect("parses");
        assert_eq!(
            t.slice_url("bk_a", "bk_a", "s"),
            "mongodb://bk_a:s@h/bk_a?authSource=bk_a&appName=x"
        );
        // No credentials, no path, no options.
        let t = Target::parse("mongodb://127.0.0.1:27017").expect("parses");
        assert_eq!(
            t.slice_url("bk_a", "bk_a", "s"),
            "mongodb://bk_a:s@127.0.0.1:27017/bk_a?authSource=bk_a"
        );
        assert_eq!(t.shown, "mongodb://127.0.0.1:27017");
    }

    #[test]
    fn secrets_with_special_characters_are_percent_encoded() {
        let t = Target::parse("mongodb://h:27017/").expect("parses");
        let url = t.slice_url("bk_a", "bk_a", "p@ss:w/rd?%#&=+ é");
        assert_eq!(
            url,
            "mongodb://bk_a:p%40ss%3Aw%2Frd%3F%25%23%26%3D%2B%20%C3%A9@h:27017/bk_a?authSource=bk_a"
        );
        // The driver reads it back as the same password.
        let parsed = ::mongodb::options::ConnectionString::parse(&url).expect("driver parses");
        let cred = parsed.credential.expect("credential");
        assert_eq!(cred.password.as_deref(), Some("p@ss:w/rd?%#&=+ é"));
        assert_eq!(cred.username.as_deref(), Some("bk_a"));
        assert_eq!(cred.source.as_deref(), Some("bk_a"));
    }

    #[test]
    fn resolve_gives_the_url_and_tokens() {
        let a = block(Mongo.resolve(
            &slice("bk_acme_w_db", "0123abcd"),
            &cfg("mongodb://admin:pw@127.0.0.1:27017/?directConnection=true"),
        ))
        .expect("resolves");
        assert_eq!(
            a.url,
            "mongodb://bk_acme_w_db:0123abcd@127.0.0.1:27017/bk_acme_w_db\
             ?authSource=bk_acme_w_db&directConnection=true"
        );
        assert_eq!(a.tokens["database"], "bk_acme_w_db");
        assert_eq!(a.tokens["user"], "bk_acme_w_db");
        assert!(!a.tokens.values().any(|v| v.contains("pw")));
    }

    #[test]
    fn mongodb_srv_is_refused_with_the_way_out() {
        let err =
            Target::parse("mongodb+srv://admin:topsecret@cluster0.example.net/").expect_err("srv");
        let text = err.to_string();
        assert!(matches!(err, AdapterError::Config(_)), "{text}");
        assert!(text.contains("mongodb+srv://"), "{text}");
        assert!(text.contains("DNS"), "{text}");
        assert!(
            text.contains("mongodb://USER:PASSWORD@HOST1:27017,HOST2:27017"),
            "{text}"
        );
        assert!(!text.contains("topsecret"), "{text}");
    }

    #[test]
    fn bad_admin_urls_name_the_fix_without_the_password() {
        for url in [
            "postgres://u:topsecret@h:5432",
            "mongodb://u:topsecret@/db",
            "mongodb://u:topsecret@h1,,h2/",
            "mongodb://u:topsecret@h:notaport/",
            "mongodb://u:topsecret@h/?maxPoolSize=abc",
        ] {
            let err = Target::parse(url).expect_err(url);
            let text = err.to_string();
            assert!(matches!(err, AdapterError::Config(_)), "{url}: {text}");
            assert!(!text.contains("topsecret"), "{url}: {text}");
        }
        let err = Target::parse("u:topsecret@h").expect_err("no scheme");
        assert!(!err.to_string().contains("topsecret"), "{err}");
        let err = block(Mongo.provision(&slice("bk_a", "x1234"), &AdapterConfig::default()));
        if std::env::var(ENV_URL).is_err() {
            let text = err.expect_err("no admin_url").to_string();
            assert!(
                text.contains("admin_url") && text.contains(ENV_URL),
                "{text}"
            );
        }
    }

    #[test]
    fn user_commands_give_the_slice_its_database_only() {
        let roles = Bson::Array(vec![
            Bson::Document(doc! { "role": "readWrite", "db": "bk_a" }),
            Bson::Document(doc! { "role": "dbAdmin", "db": "bk_a" }),
        ]);
        assert_eq!(
            create_user_command("bk_a", "bk_a", "s3"),
            doc! { "createUser": "bk_a", "pwd": "s3", "roles": roles.clone() }
        );
        // The command name comes first: MongoDB takes a document's first key as the command.
        assert_eq!(
            create_user_command("bk_a", "bk_a", "s3")
                .keys()
                .next()
                .map(String::as_str),
            Some("createUser")
        );
        assert_eq!(
            update_user_command("bk_a", "bk_a", "s4"),
            doc! { "updateUser": "bk_a", "pwd": "s4", "roles": roles }
        );
        assert_eq!(drop_user_command("bk_a"), doc! { "dropUser": "bk_a" });
        assert_eq!(
            drop_all_users_command(),
            doc! { "dropAllUsersFromDatabase": 1 }
        );
        assert_eq!(
            drop_all_roles_command(),
            doc! { "dropAllRolesFromDatabase": 1 }
        );
        assert_eq!(
            seal_command("bk_t", "bk_t"),
            doc! { "updateUser": "bk_t", "roles": [ { "role": "read", "db": "bk_t" } ] }
        );
    }

    #[test]
    fn clone_commands_copy_server_side_with_options_and_indexes() {
        assert_eq!(
            copy_command("orders", "bk_to"),
            doc! {
                "aggregate": "orders",
                "pipeline": [ { "$out": { "db": "bk_to", "coll": "orders" } } ],
                "cursor": {},
                "bypassDocumentValidation": true,
            }
        );
        let plain = doc! { "name": "orders", "type": "collection", "options": {}, "info": {} };
        assert_eq!(create_command(&plain), Ok(None));
        let validated = doc! {
            "name": "users", "type": "collection",
            "options": { "validator": { "email": { "$exists": true } } },
        };
        assert_eq!(
            create_command(&validated),
            Ok(Some(
                doc! { "create": "users", "validator": { "email": { "$exists": true } } }
            ))
        );
        let view = doc! {
            "name": "recent", "type": "view",
            "options": { "viewOn": "orders", "pipeline": [ { "$limit": 10 } ] },
        };
        assert_eq!(
            create_command(&view),
            Ok(Some(
                doc! { "create": "recent", "viewOn": "orders", "pipeline": [ { "$limit": 10 } ] }
            ))
        );
        let capped = doc! { "name": "log", "type": "collection", "options": { "capped": true, "size": 4096 } };
        assert!(create_command(&capped)
            .expect_err("capped")
            .contains("capped"));
        let ts = doc! { "name": "m", "type": "timeseries", "options": {} };
        assert!(create_command(&ts)
            .expect_err("timeseries")
            .contains("timeseries"));

        assert_eq!(
            index_spec(&doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" }),
            None
        );
        let unique = doc! {
            "v": 2, "key": { "email": 1 }, "name": "email_1", "unique": true,
            "ns": "bk_t.users", "partialFilterExpression": { "email": { "$exists": true } },
        };
        let spec = index_spec(&unique).expect("carried");
        assert_eq!(
            spec,
            doc! {
                "key": { "email": 1 }, "name": "email_1", "unique": true,
                "partialFilterExpression": { "email": { "$exists": true } },
            }
        );
        assert_eq!(
            create_indexes_command("users", vec![spec.clone()]),
            doc! { "createIndexes": "users", "indexes": [spec] }
        );
    }

    #[test]
    fn the_adapter_is_registered_and_can_clone() {
        let registry = super::super::Registry::default();
        let a = registry.get("mongodb").expect("registered");
        assert_eq!(a.names(), ["mongodb"]);
        let caps = block(a.capabilities(&AdapterConfig::default())).expect("capabilities");
        assert!(caps.clone);
        assert_eq!(super::super::can_clone_statically("mongodb"), Some(true));
    }

    /// A port on which nothing listens.
    fn closed_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port")
    }

    #[track_caller]
    fn assert_unreachable_quickly(url: &str, password: &str) {
        let s = slice("bk_acme_w_db", "slice-secret-xyz");
        let c = cfg(url);
        let started = Instant::now();
        // Side by side: each gives up after the 5 s server selection timeout.
        let (p, t, l, e) = block(async {
            tokio::join!(
                Mongo.provision(&s, &c),
                Mongo.teardown(&s, &c),
                Mongo.list(&c),
                Mongo.exists(&s, &c),
            )
        });
        let errors = [p.err(), t.err(), l.err(), e.err()];
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "{:?}",
            started.elapsed()
        );
        for err in errors {
            let err = err.expect("no server: the verb must fail");
            let text = err.to_string();
            assert!(
                matches!(err, AdapterError::Unreachable { .. }) && err.transient(),
                "{text}"
            );
            assert!(!text.contains(password), "password in: {text}");
            assert!(!text.contains("slice-secret-xyz"), "secret in: {text}");
            assert!(text.contains("127.0.0.1"), "{text}");
        }
    }

    #[test]
    fn a_closed_port_is_unreachable_within_seconds_and_shows_no_password() {
        let port = closed_port();
        let started = Instant::now();
        let url = format!("mongodb://admin:closed-port-pw@127.0.0.1:{port}/?directConnection=true");
        let err = block(Mongo.provision(&slice("bk_a", "s-123"), &cfg(&url))).expect_err("down");
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "{:?}",
            started.elapsed()
        );
        assert!(matches!(err, AdapterError::Unreachable { .. }), "{err}");
        assert_unreachable_quickly(&url, "closed-port-pw");
    }

    #[test]
    fn a_listener_that_speaks_garbage_is_unreachable_not_a_hang() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut buf = [0u8; 1024];
                    let _ = stream.read(&mut buf);
                    let _ = stream.write_all(b"HTTP/1.0 400 Bad Request\r\n\r\nnot mongo at all");
                });
            }
        });
        let url = format!("mongodb://admin:garbage-pw-77@127.0.0.1:{port}/?directConnection=true");
        assert_unreachable_quickly(&url, "garbage-pw-77");
    }
}
