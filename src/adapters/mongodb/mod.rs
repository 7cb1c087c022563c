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
//!   databases lazily; the marker makes an empty slice exist (and be listed). The home that
//!   made the slice adds its identity to it (`home`; see [`crate::adapters::Maker`]), with
//!   an update whose filter wants no `home` yet: of two homes claiming at once, one wins.
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
//! daemon's environment) is used.
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
//!   binky 0.1.2 mapped it (forbidden characters to `_`, shortened with a hash suffix), so
//!   existing databases keep their names.

use std::future::Future;
use std::time::Duration;

use ::mongodb::bson::{doc, Bson, Document};
use ::mongodb::error::{Error as MongoError, ErrorKind};
use ::mongodb::options::ClientOptions;
use ::mongodb::{Client, Database};
use binky_controllers::url::{password_decoded, percent_encode, Url};

use super::{
    bounded, fit_name, redact, Adapter, AdapterConfig, AdapterError, Address, Maker, Result, Slice,
};

mod commands;
mod target;
pub use commands::*;
pub use target::*;

/// The environment variable read when a service has no `admin_url` (binky 0.1.2's).
pub const ENV_URL: &str = super::AdapterKind::Mongodb.env_var();
/// The marker collection, binky 0.1.2's name: it makes an empty slice's database exist.
pub const MARKER: &str = "__binky";
/// The longest database name, in bytes: binky 0.1.2's figure, so mapped names stay the same.
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
/// `DuplicateKey`.
const DUPLICATE_KEY: i32 = 11000;
/// `UserNotFound`.
const USER_NOT_FOUND: i32 = 11;
/// `NamespaceExists`.
const NAMESPACE_EXISTS: i32 = 48;
/// `Unauthorized`.
const UNAUTHORIZED: i32 = 13;

/// The mongodb adapter.
pub struct Mongo;

/// The slice's database name, checked.
fn slice_db(slice: &Slice) -> Result<String> {
    let name = database_name(&slice.name)?;
    debug_assert!(valid_database_name(&name));
    Ok(name)
}

fn check_secret(slice: &Slice) -> Result<()> {
    if slice.secret.is_empty() {
        return Err(AdapterError::Config(format!(
            "the secret of slice `{}` is empty, which MongoDB cannot take as a password",
            slice.name
        )));
    }
    Ok(())
}

#[async_trait::async_trait]
impl Adapter for Mongo {
    // It clones (`AdapterKind::can_clone`): `$out` into another database, a server-side
    // copy of a golden template.
    fn kind(&self) -> Option<super::AdapterKind> {
        Some(super::AdapterKind::Mongodb)
    }

    async fn provision(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        let name = slice_db(slice)?;
        check_secret(slice)?;
        let (target, client) = Target::connect(cfg).await?;
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
    }

    async fn resolve(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Address> {
        let name = slice_db(slice)?;
        let target = Target::from_config(cfg)?;
        Ok(Address::new(
            target.slice_url(&name, &name, &slice.secret),
            [("database", name.clone()), ("user", name)],
        ))
    }

    async fn teardown(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        let name = slice_db(slice)?;
        let (target, client) = Target::connect(cfg).await?;
        target
            .bounded(VERB_TIMEOUT, target.drop_slice(&client, &name))
            .await
    }

    async fn list(&self, cfg: &AdapterConfig) -> Result<Vec<String>> {
        let (target, client) = Target::connect(cfg).await?;
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
    }

    async fn maker(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Maker> {
        let name = slice_db(slice)?;
        let (target, client) = Target::connect(cfg).await?;
        target
            .bounded(VERB_TIMEOUT, target.maker(&client, &name))
            .await
    }

    async fn claim(&self, slice: &Slice, cfg: &AdapterConfig, home: &str) -> Result<Maker> {
        let name = slice_db(slice)?;
        super::check_home(home)?;
        let (target, client) = Target::connect(cfg).await?;
        target
            .bounded(VERB_TIMEOUT, async {
                let claimed = client
                    .database(&name)
                    .collection::<Document>(MARKER)
                    .update_one(claim_filter(), claim_update(home))
                    .upsert(true)
                    .await;
                match claimed {
                    Ok(_) => {}
                    // Another home's marker: its `_id` is taken; read it back below.
                    Err(e) if command_code(&e) == Some(DUPLICATE_KEY) => {}
                    Err(e) => {
                        return Err(target.error(&format!("claiming database {name}"), &e, &[]))
                    }
                }
                target.maker(&client, &name).await
            })
            .await
    }

    async fn exists(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Option<bool>> {
        let name = slice_db(slice)?;
        let (target, client) = Target::connect(cfg).await?;
        target
            .bounded(VERB_TIMEOUT, target.database_exists(&client, &name))
            .await
            .map(Some)
    }

    async fn clone_slice(&self, from: &Slice, to: &Slice, cfg: &AdapterConfig) -> Result<()> {
        let src = slice_db(from)?;
        let dst = slice_db(to)?;
        check_secret(to)?;
        let (target, client) = Target::connect(cfg).await?;
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
    }

    async fn seal_template(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        let name = slice_db(slice)?;
        let (target, client) = Target::connect(cfg).await?;
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
    }
}

#[cfg(test)]
mod tests;
