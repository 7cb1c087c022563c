//! The `elasticsearch` adapter (also answering to `opensearch`): each slice is an index
//! prefix on a shared cluster, reached over its REST API (default port 9200), with a user
//! and role of its own where the cluster has security turned on.
//!
//! # What a slice is
//! - The prefix is the slice's name (`bk_acme_login_fix_search`: already lower-case, no
//!   leading `-`, `_` or `+`, far below the 255-byte limit). A world's indices are the
//!   prefix itself and `<prefix>-<name>` (binky 0.1.2's convention): the application
//!   writes `bk_acme_login_fix_search-products` instead of `products`.
//! - `options.indices` (a comma list, 0.1.2's) are created empty on provision, as
//!   `<prefix>-<index>`; mappings stay the application's.
//! - With security on, a role and a user named after the slice: the role has every index
//!   privilege on exactly `<prefix>` and `<prefix>-*` (the `-` keeps `bk_a` from matching
//!   `bk_ab-…`), the user has the slice's secret as password (on OpenSearch `Bk_` + secret,
//!   so the common upper/lower/digit/special password rules pass). Elasticsearch's
//!   `/_security/role` and `/_security/user`; OpenSearch's security plugin's
//!   `/_plugins/_security/api/roles`, `/internalusers` and `/rolesmapping`. The flavour is
//!   read from `GET /` (`version.distribution`), not from the adapter's name.
//! - `${search.url}` is `http://<user>:<password>@host:9200/<prefix>`, binky 0.1.2's form
//!   (the server with the prefix as path); tokens: `prefix`, and `endpoint`
//!   (`http://<user>:<password>@host:9200`, what an Elasticsearch/OpenSearch client takes).
//!
//! # Options
//! - `indices`: comma-separated index names created (empty) under the prefix.
//! - `api_key`: an Elasticsearch API key for the admin calls, sent as
//!   `Authorization: ApiKey …` instead of admin_url's user and password.
//!
//! `admin_url` falls back to `$BINKY_ELASTICSEARCH_URL`, then `http://localhost:9200`; its
//! user (or API key) needs `manage_security` (Elasticsearch) or REST API access to the
//! security plugin (OpenSearch: `all_access`) and the right to create and delete indices.
//!
//! # Which home made a slice
//! A document of binky's catalog index `binky_catalog` (its id the slice's name, its source
//! `{"home": "<id>"}`; see [`crate::adapters::Maker`]), written with `_create`, so of two
//! homes claiming at once one wins; deleted last at teardown.
//!
//! # Guarantees
//! - Idempotent: provisioning again rewrites the role and resets the user's password;
//!   tearing down what is gone succeeds (404 is "already gone").
//! - Teardown removes the user (and OpenSearch's role mapping) first, then the role, then
//!   every index named `<prefix>` or `<prefix>-…`, each **by its exact name** — never a
//!   wildcard delete, which Elasticsearch 8 refuses (`action.destructive_requires_name`).
//! - A server that is down or overloaded (HTTP 429, 502–504), or that refuses admin_url's
//!   credentials (401), gives [`AdapterError::Unreachable`]; the 401 message names
//!   admin_url and `options.api_key`. No message carries a password or key.
//!
//! # What it cannot guarantee
//! - **Without security** (Elasticsearch with `xpack.security.enabled: false`, OpenSearch
//!   without its security plugin) there are no credentials to give: the world's address
//!   carries admin_url's, any client reaches every index, and worlds are kept apart only by
//!   using their prefix. The same holds when admin_url's user may not manage users. binky
//!   logs a warning saying so, once per server; `resolve` decides by trying the slice's own
//!   user.
//! - The world's role has no cluster privileges on Elasticsearch (on OpenSearch only
//!   `cluster_composite_ops`, which bulk and multi-get need): `GET /`, `_cat` and cluster
//!   health are refused to it.
//! - Data streams' backing indices (`.ds-<prefix>-…`) are not matched by the prefix.
//! - Not run against a real Elasticsearch or OpenSearch (neither is installable on the
//!   machines binky is tested on): the unit tests below check names, the requests sent and
//!   the handling of canned answers from a scripted local HTTP server.

use std::collections::BTreeSet;

use hyper::Method;
use serde_json::json;

use binky_controllers::url::percent_encode;

use super::http::{Endpoint, Http, Response};
use super::{Adapter, AdapterConfig, AdapterError, Address, Maker, Result, Slice};

mod server;
use server::*;

/// The REST port.
pub const DEFAULT_PORT: u16 = 9200;
/// Where the admin URL comes from when the service has none (binky 0.1.2's).
pub const ENV_URL: &str = super::AdapterKind::Elasticsearch.env_var();
/// The server when neither `admin_url` nor [`ENV_URL`] names one: the usual port here.
pub const DEFAULT_URL: &str = "http://localhost:9200";
/// Between the prefix and an index's own name (binky 0.1.2's convention).
pub const SEP: &str = "-";
/// Index names are at most this many bytes.
const MAX_INDEX: usize = 255;
/// Slice names binky gives are at most this long.
const MAX_PREFIX: usize = 63;
/// Logged once per server and reason when its worlds share admin_url's credentials.
const SHARED: super::SharedWarning = super::SharedWarning {
    adapter: "elasticsearch",
    consequence: "every world's address on this server carries admin_url's credentials and worlds are kept apart by index prefix only",
};

/// The elasticsearch and opensearch adapter.
pub struct Elasticsearch;

/// Which REST API the security calls go to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flavour {
    Elasticsearch,
    OpenSearch,
}

/// The slice's index prefix: its name, checked against the index name rules.
pub fn prefix(slice: &Slice) -> Result<String> {
    let name = &slice.name;
    // `bk_` also keeps teardown away from every index binky did not name.
    if name.starts_with("bk_") && name.len() <= MAX_PREFIX && super::is_plain_name(name) {
        Ok(name.clone())
    } else {
        Err(AdapterError::Config(format!(
            "`{name}` cannot be an index prefix: `bk_` then [a-z0-9_], at most {MAX_PREFIX} \
             bytes"
        )))
    }
}

/// `options.indices` as full index names under `prefix`.
fn declared_indices(cfg: &AdapterConfig, prefix: &str) -> Result<Vec<String>> {
    let Some(list) = cfg.options.get("indices") else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for index in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let full = format!("{prefix}{SEP}{index}");
        let bad_char = index.chars().find(|c| {
            c.is_ascii_uppercase()
                || c.is_whitespace()
                || matches!(
                    c,
                    '\\' | '/' | '*' | '?' | '"' | '<' | '>' | '|' | ',' | '#' | ':'
                )
        });
        if let Some(c) = bad_char {
            return Err(AdapterError::Config(format!(
                "options.indices: `{index}` cannot be part of an index name (`{c}`): use \
                 lower-case letters, digits, `-`, `_` and `.`"
            )));
        }
        if full.len() > MAX_INDEX {
            return Err(AdapterError::Config(format!(
                "options.indices: `{full}` is longer than the {MAX_INDEX} bytes an index name \
                 may have; shorten `{index}`"
            )));
        }
        out.push(full);
    }
    Ok(out)
}

/// Is `index` one of the prefix's?
fn owned(prefix: &str, index: &str) -> bool {
    index == prefix
        || index
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with(SEP))
}

/// The password of the slice's user.
fn password(flavour: Flavour, slice: &Slice) -> String {
    match flavour {
        Flavour::Elasticsearch => slice.secret.clone(),
        // OpenSearch's usual `password_validation_regex` wants an upper-case letter and a
        // special character; the secret is lower-case hex.
        Flavour::OpenSearch => format!("Bk_{}", slice.secret),
    }
}

#[async_trait::async_trait]
impl Adapter for Elasticsearch {
    fn kind(&self) -> Option<super::AdapterKind> {
        Some(super::AdapterKind::Elasticsearch)
    }

    async fn provision(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        let prefix = prefix(slice)?;
        let wanted = declared_indices(cfg, &prefix)?;
        let server = Server::from_config(cfg)?;
        let flavour = server.flavour().await?;
        if server.security(flavour).await? {
            server.ensure_user(flavour, slice, &prefix).await?;
        } else {
            SHARED.warn(&server.ep.server, "security is off on this cluster");
        }
        if wanted.is_empty() {
            return Ok(());
        }
        let existing: BTreeSet<String> = server.owned(&prefix).await?.into_iter().collect();
        for index in wanted.iter().filter(|i| !existing.contains(*i)) {
            let resp = server
                .call(
                    Method::PUT,
                    &format!("/{}", percent_encode(index)),
                    Some(&json!({})),
                )
                .await?;
            let raced =
                resp.status == 400 && resp.text(400).contains("resource_already_exists_exception");
            if !resp.ok() && !raced {
                return Err(server.error(&format!("creating index {index}"), &resp, &[]));
            }
        }
        Ok(())
    }

    async fn resolve(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Address> {
        let prefix = prefix(slice)?;
        let server = Server::from_config(cfg)?;
        let flavour = server.flavour().await?;
        // The slice's own user, if the cluster knows it (Basic auth, no API key).
        let own = Endpoint {
            user: Some(slice.name.clone()),
            password: Some(password(flavour, slice)),
            ..server.ep.clone()
        };
        let probe = server
            .http
            .call(&own, Method::GET, Server::whoami(flavour), None, &[])
            .await?;
        if matches!(probe.status, 429 | 502..=504) {
            return Err(server.error("trying the slice's user", &probe, &[]));
        }
        let ep = if probe.ok() { &own } else { &server.ep };
        let path = format!("/{}", percent_encode(&prefix));
        Ok(Address::new(
            ep.url_with_credentials(&path),
            [
                ("prefix", prefix),
                ("endpoint", ep.url_with_credentials("")),
            ],
        ))
    }

    async fn teardown(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        let prefix = prefix(slice)?;
        let server = Server::from_config(cfg)?;
        let flavour = server.flavour().await?;
        // The user first: the world stops writing before its indices go.
        if server.security(flavour).await? {
            server.remove_user(flavour, slice).await?;
        }
        for index in server.owned(&prefix).await? {
            server
                .expect(
                    Method::DELETE,
                    &format!("/{}", percent_encode(&index)),
                    None,
                    &format!("deleting index {index}"),
                    &[],
                )
                .await?;
        }
        // Its mark last: a teardown cut short before this is still its home's to finish.
        server.forget(&prefix).await
    }

    async fn maker(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Maker> {
        let prefix = prefix(slice)?;
        let server = Server::from_config(cfg)?;
        if let Some(home) = server.marked_home(&prefix).await? {
            return Ok(Maker::Home(home));
        }
        Ok(if server.owned(&prefix).await?.is_empty() {
            Maker::Absent
        } else {
            Maker::Unmarked
        })
    }

    async fn claim(&self, slice: &Slice, cfg: &AdapterConfig, home: &str) -> Result<Maker> {
        let prefix = prefix(slice)?;
        super::check_home(home)?;
        let server = Server::from_config(cfg)?;
        // A slice without indices yet is marked too: its prefix is its all the same.
        server.claim(&prefix, home).await?;
        Ok(match server.marked_home(&prefix).await? {
            Some(h) => Maker::Home(h),
            None => Maker::Unmarked,
        })
    }

    async fn list(&self, cfg: &AdapterConfig) -> Result<Vec<String>> {
        let server = Server::from_config(cfg)?;
        // A prefix holds no `-`: an index's prefix is what comes before its first one.
        let prefixes: BTreeSet<String> = server
            .indices("bk_")
            .await?
            .iter()
            .map(|i| i.split(SEP).next().unwrap_or(i).to_owned())
            .collect();
        Ok(prefixes.into_iter().collect())
    }

    async fn exists(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Option<bool>> {
        let prefix = prefix(slice)?;
        let wanted = declared_indices(cfg, &prefix)?;
        // Without declared indices a slice may hold none at all: nothing to look for.
        if wanted.is_empty() {
            return Ok(None);
        }
        let server = Server::from_config(cfg)?;
        let have: BTreeSet<String> = server.owned(&prefix).await?.into_iter().collect();
        Ok(Some(wanted.iter().all(|i| have.contains(i))))
    }
}

#[cfg(test)]
mod tests;
