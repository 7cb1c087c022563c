//! A resource service (`[services.NAME]` with `adapter`): `adapter`, `admin_url`,
//! `migrate`, `seed`, `clone_from`, `clone_key_files`, `sync`, `buckets`, `options`, and
//! the keys it shares with a process (`workdir`, `env`, `env_file`).

use std::ops::Range;

use binky_controllers::spec::{Resource, SyncMode};

use crate::adapters::kind::{AdapterKind, AdapterName, NameError};

use super::cx::join;
use super::defaults::Defaults;
use super::{Cx, Table};

/// The keys of a resource service.
pub(super) const RESOURCE_KEYS: &[&str] = &[
    "adapter",
    "admin_url",
    "migrate",
    "seed",
    "clone_from",
    "clone_key_files",
    "sync",
    "buckets",
    "options",
];
/// Keys a resource service may have besides its own.
pub(super) const RESOURCE_SHARED_KEYS: &[&str] =
    &["depends_on", "shared", "workdir", "env", "env_file"];

impl Cx<'_> {
    /// A resource service (one with `adapter`) at `path`; `shared` is its `shared` key.
    pub(super) fn resource(
        &mut self,
        t: &Table<'_>,
        path: &str,
        span: Range<usize>,
        shared: bool,
        defaults: &Defaults,
    ) -> Option<Resource> {
        let adapter = self
            .non_empty_string(t, path, "adapter")
            .and_then(|a| self.adapter_name(t, path, span.clone(), a));
        let sync = match Self::get(t, "sync") {
            Some(v) => match self.string_value(v, &join(path, "sync")).as_deref() {
                Some("off") => SyncMode::Off,
                Some("notify") => SyncMode::Notify,
                Some("cdc") => SyncMode::Cdc,
                Some("reactive") => SyncMode::Reactive,
                Some(other) => {
                    self.error(
                        v.span(),
                        &join(path, "sync"),
                        format!("unknown sync mode `{other}`"),
                        Some("use one of: off, notify, cdc, reactive".to_owned()),
                    );
                    SyncMode::Off
                }
                None => SyncMode::Off,
            },
            None => SyncMode::Off,
        };
        if sync != SyncMode::Off && !shared {
            self.key_error(
                t,
                path,
                "sync",
                span.clone(),
                "`sync` requires `shared = true`",
                Some("add shared = true, or remove sync".to_owned()),
            );
        }
        let admin_url = self.string(t, path, "admin_url");
        let migrate = self.string(t, path, "migrate");
        let seed = self.string(t, path, "seed");
        let clone_from = self.string(t, path, "clone_from");
        let clone_key_files: Option<Vec<String>> = self.strings(t, path, "clone_key_files", false);
        if clone_key_files.is_some() && clone_from.is_none() {
            self.key_error(
                t,
                path,
                "clone_key_files",
                span.clone(),
                "`clone_key_files` only matters with `clone_from`",
                Some("add clone_from = \"golden\", or remove clone_key_files".to_owned()),
            );
        }
        let buckets = self.strings(t, path, "buckets", false).unwrap_or_default();
        let options = self.string_map(t, path, "options").unwrap_or_default();
        let workdir = self
            .string(t, path, "workdir")
            .unwrap_or_else(|| defaults.workdir.clone());
        let own = self.string_map(t, path, "env").unwrap_or_default();
        // `[defaults] env` first, the service's own keys over it.
        let mut env = defaults.env.clone();
        env.extend(own);
        let env_file = self.strings(t, path, "env_file", true).unwrap_or_default();
        Some(Resource {
            adapter: adapter?,
            admin_url,
            migrate,
            seed,
            clone_from,
            clone_key_files,
            sync,
            buckets,
            options,
            workdir,
            env,
            env_file,
        })
    }
}

impl Cx<'_> {
    /// `adapter`, when it can name an adapter (a built-in one, or an external one by a name
    /// its executable can have), with a version written like one if it has `@`; else an
    /// error naming what is wrong and the nearest built-in name.
    fn adapter_name(
        &mut self,
        t: &Table<'_>,
        path: &str,
        span: Range<usize>,
        adapter: String,
    ) -> Option<String> {
        match AdapterName::parse(&adapter) {
            // Stored as its canonical name: the controllers compare the text.
            Ok(name) => Some(name.canonical()),
            Err(e) => {
                let near = match &e {
                    NameError::BadName { name } => {
                        super::cx::suggest(name.trim(), &AdapterKind::all_names())
                    }
                    _ => None,
                };
                self.key_error(t, path, "adapter", span, e.to_string(), Some(e.fix(near)));
                None
            }
        }
    }
}

/// An `admin_url` with a password written into it (not a `${env.NAME}` token).
pub(super) fn url_has_password(url: &str) -> bool {
    binky_controllers::url::password(url).is_some_and(|pw| !pw.is_empty() && !pw.contains("${"))
}
