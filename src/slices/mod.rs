//! The real slice effects: adapters from the registry, on the server the service names, or
//! on binky's managed server of that kind, or (a world's own redis-server) on a server
//! binky runs for the slice alone.

pub mod named;

use std::collections::BTreeMap;
use std::sync::Arc;

use binky_controllers::adapter::{SliceAddress, SliceEffects, SliceFault, SliceSpec, Teardown};
use binky_controllers::store::{self, StoreError};

use self::named::Answers;
use crate::adapters::kind::AdapterName;
use crate::adapters::{redact, Adapter, AdapterConfig, AdapterError, Registry, Slice};
use crate::servers::{Kind, ServerName, Servers};

/// Adapters plus managed servers. A clone shares everything with the original (the
/// daemon asks the servers binky.toml names with one: [`named`]).
#[derive(Clone)]
pub struct RealSlices {
    registry: Registry,
    servers: Arc<Servers>,
    answers: Arc<Answers>,
}

impl RealSlices {
    /// Slices made with `registry`, on `servers` when no `admin_url` is given.
    pub fn new(registry: Registry, servers: Arc<Servers>) -> Self {
        RealSlices {
            registry,
            servers,
            answers: Arc::default(),
        }
    }

    /// What the servers binky.toml names answered when last asked.
    pub fn answers(&self) -> &Answers {
        &self.answers
    }

    /// Is `spec`'s slice on binky's shared managed server of its kind, and is that server
    /// not running now (stopped by `binky servers stop`, dead, or failing to start)? Asking
    /// such a slice anything would start the server, which only `binky up` and the server
    /// watch do.
    fn on_a_managed_server_not_running(
        &self,
        spec: &SliceSpec,
        adapter: &dyn crate::adapters::Adapter,
    ) -> Result<bool, SliceFault> {
        let Some(kind) = self.kind(spec) else {
            return Ok(false);
        };
        if spec.admin_url.is_some()
            || self.admin_url_from_env(spec).is_some()
            || self.wants_own_server(spec, adapter)
        {
            return Ok(false);
        }
        let row = self
            .servers
            .row(&ServerName::shared(kind))
            .map_err(store_fault)?;
        Ok(!row.is_some_and(|r| Servers::runs(&r)))
    }

    /// The server named by the environment variable of `spec`'s built-in adapter, whichever
    /// of its names the service gives (see [`crate::adapters::admin_url_env`]), read here,
    /// once, and recorded with the slice (so it is dropped where it was made).
    fn admin_url_from_env(&self, spec: &SliceSpec) -> Option<String> {
        crate::adapters::admin_url_env(&spec.adapter)
            .and_then(|var| std::env::var(var).ok())
            .map(|url| url.trim().to_owned())
            .filter(|url| !url.is_empty())
    }

    /// The adapter's view of `spec`: where its slice lives — its `admin_url`; else the
    /// server the adapter's environment variable names; else a server of the slice's own
    /// when the adapter wants one (a world's own redis-server), started here; else binky's
    /// shared managed server of its kind — and what the store recorded of the slices there.
    async fn config(
        &self,
        spec: &SliceSpec,
        adapter: &dyn crate::adapters::Adapter,
    ) -> Result<AdapterConfig, SliceFault> {
        let mut cfg = AdapterConfig {
            admin_url: spec
                .admin_url
                .clone()
                .or_else(|| self.admin_url_from_env(spec)),
            options: spec.options.clone(),
            buckets: spec.buckets.clone(),
            ..AdapterConfig::default()
        };
        if cfg.admin_url.is_none() {
            if let Some(kind) = self.kind(spec) {
                let own = adapter.server_per_slice(&cfg).map_err(fault)?;
                let started = if own {
                    self.servers
                        .ensure_world(kind, &spec.slice, &spec.secret)
                        .await
                } else {
                    self.servers.ensure(kind).await
                };
                cfg.admin_url = Some(started.map_err(server_fault)?);
                cfg.own_server = own;
            }
        }
        if let Some(url) = &cfg.admin_url {
            cfg.recorded = self.recorded(spec, url).map_err(store_fault)?;
        }
        Ok(cfg)
    }

    /// The tokens recorded with every slice of `spec`'s adapter on the server at `url`
    /// (credentials aside, the same host and port), by slice name.
    fn recorded(
        &self,
        spec: &SliceSpec,
        url: &str,
    ) -> Result<BTreeMap<String, BTreeMap<String, String>>, StoreError> {
        let server = redact(url);
        // An adapter by any of its names and versions is one adapter; an external one is
        // its name.
        let family = |a: &str| {
            let read = AdapterName::read(a);
            read.kind.map_or(read.name, |k| k.name()).to_owned()
        };
        let adapter = family(&spec.adapter);
        self.servers.store().read(|c| {
            let mut out = BTreeMap::new();
            for w in store::worlds(c)? {
                for s in store::slices(c, w.id)? {
                    let here = s.admin_url.as_deref().map(redact).as_deref() == Some(&server);
                    if here && family(&s.adapter) == adapter {
                        out.insert(s.name, s.tokens);
                    }
                }
            }
            Ok(out)
        })
    }

    /// The kind of server binky could run for `spec` (a built-in adapter binky runs
    /// servers for).
    fn kind(&self, spec: &SliceSpec) -> Option<Kind> {
        Kind::for_adapter(&spec.adapter)
    }

    /// Was `spec`'s slice, as recorded (its `admin_url` the server it was made on), made on
    /// a server of its own? Its recorded server is that one, or was: a server of a slice's
    /// own answers to the slice's secret, which no shared server does.
    fn made_on_own_server(&self, spec: &SliceSpec, kind: Kind) -> Result<bool, SliceFault> {
        let Some(url) = spec.admin_url.as_deref() else {
            return Ok(false);
        };
        let row = self
            .servers
            .row(&ServerName::of_slice(kind, &spec.slice))
            .map_err(store_fault)?;
        Ok(row.is_some_and(|r| r.admin_url == url)
            || binky_controllers::url::password_decoded(url).as_deref()
                == Some(spec.secret.as_str()))
    }

    /// Does `spec`'s slice live on a server of its own (no server given, and its adapter
    /// wants one)?
    fn wants_own_server(&self, spec: &SliceSpec, adapter: &dyn crate::adapters::Adapter) -> bool {
        spec.admin_url.is_none()
            && self.admin_url_from_env(spec).is_none()
            && self.kind(spec).is_some()
            && adapter
                .server_per_slice(&AdapterConfig {
                    options: spec.options.clone(),
                    ..AdapterConfig::default()
                })
                .unwrap_or(false)
    }
}

/// Does `name` carry the home `home`'s identity (`bk_<home>_…`, `bk_golden_<home>_…`)? Such
/// a name is only ever made by that home (identities are random, 40 bits), so its slice
/// cannot be another home's; a name from before homes had an identity can.
fn named_by(name: &str, home: &str) -> bool {
    let after = |prefix: &str| {
        name.strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix(home))
            .is_some_and(|rest| rest.starts_with('_'))
    };
    after("bk_") || after("bk_golden_")
}

/// The error that says the slice `slice` on `cfg`'s server is the home `home`'s.
fn other_home(cfg: &AdapterConfig, slice: &Slice, home: &str) -> SliceFault {
    fault(AdapterError::OtherHome {
        server: cfg.admin_url.as_deref().map(redact).unwrap_or_default(),
        slice: slice.name.clone(),
        home: home.to_owned(),
    })
}

impl RealSlices {
    /// This home's identity (the store's).
    fn home(&self) -> Result<String, SliceFault> {
        self.servers
            .store()
            .read(store::home_id)
            .map_err(store_fault)
    }

    /// The other home `slice`'s server records as its maker, if one does. A name carrying
    /// this home's identity is not looked up: no other home makes one.
    async fn other_maker(
        &self,
        adapter: &dyn Adapter,
        slice: &Slice,
        cfg: &AdapterConfig,
        home: &str,
    ) -> Result<Option<String>, SliceFault> {
        if named_by(&slice.name, home) {
            return Ok(None);
        }
        let maker = adapter.maker(slice, cfg).await.map_err(fault)?;
        Ok(maker.other_than(home).map(str::to_owned))
    }

    /// Refuses to touch `slice` when its server records another home as its maker.
    async fn refuse_others(
        &self,
        adapter: &dyn Adapter,
        slice: &Slice,
        cfg: &AdapterConfig,
        home: &str,
    ) -> Result<(), SliceFault> {
        match self.other_maker(adapter, slice, cfg, home).await? {
            Some(other) => Err(other_home(cfg, slice, &other)),
            None => Ok(()),
        }
    }

    /// Marks `slice` on its server as this home's (adopting one made before marks named a
    /// home); an error when another home's mark won.
    async fn claim(
        &self,
        adapter: &dyn Adapter,
        slice: &Slice,
        cfg: &AdapterConfig,
        home: &str,
    ) -> Result<(), SliceFault> {
        match adapter
            .claim(slice, cfg, home)
            .await
            .map_err(fault)?
            .other_than(home)
        {
            Some(other) => Err(other_home(cfg, slice, other)),
            None => Ok(()),
        }
    }
}

fn server_fault(e: crate::servers::ServerError) -> SliceFault {
    if e.permanent() {
        SliceFault::Permanent(Box::new(e))
    } else {
        SliceFault::Transient(Box::new(e))
    }
}

fn store_fault(e: StoreError) -> SliceFault {
    SliceFault::Transient(Box::new(e))
}

fn slice_of(spec: &SliceSpec) -> Slice {
    Slice {
        name: spec.slice.clone(),
        secret: spec.secret.clone(),
    }
}

impl RealSlices {
    /// The adapter: a built-in one, else `binky-adapter-<name>` on the `PATH` of the
    /// `binky up` that wrote the world (then the daemon's own).
    fn adapter(
        &self,
        spec: &SliceSpec,
    ) -> Result<std::sync::Arc<dyn crate::adapters::Adapter>, SliceFault> {
        if !self.registry.is_builtin(&spec.adapter) {
            if let Some(path) = &spec.search_path {
                let name = AdapterName::read(&spec.adapter).name;
                if let Some(e) =
                    crate::adapters::external::External::find_in(name, std::ffi::OsStr::new(path))
                {
                    return Ok(std::sync::Arc::new(e));
                }
            }
        }
        self.registry.get(&spec.adapter).map_err(fault)
    }
}

fn fault(e: AdapterError) -> SliceFault {
    if e.transient() {
        SliceFault::Transient(Box::new(e))
    } else {
        SliceFault::Permanent(Box::new(e))
    }
}

/// The address of `slice` (made as `spec` says, with `cfg`), its tokens completed, and
/// the admin URL it was made with.
async fn address(
    adapter: &dyn Adapter,
    slice: &Slice,
    spec: &SliceSpec,
    cfg: AdapterConfig,
) -> Result<SliceAddress, SliceFault> {
    let addr = adapter.resolve(slice, &cfg).await.map_err(fault)?;
    let addr = crate::adapters::tokens::complete(&spec.adapter, addr);
    Ok(SliceAddress {
        url: addr.url,
        tokens: addr.tokens,
        admin_url: cfg.admin_url,
    })
}

impl SliceEffects for RealSlices {
    async fn provision(&self, spec: &SliceSpec) -> Result<SliceAddress, SliceFault> {
        let adapter = self.adapter(spec)?;
        let cfg = self.config(spec, adapter.as_ref()).await?;
        let slice = slice_of(spec);
        let home = self.home()?;
        // Another home's slice is neither healed (its password set to this home's secret)
        // nor used.
        self.refuse_others(adapter.as_ref(), &slice, &cfg, &home)
            .await?;
        adapter.provision(&slice, &cfg).await.map_err(fault)?;
        self.claim(adapter.as_ref(), &slice, &cfg, &home).await?;
        address(adapter.as_ref(), &slice, spec, cfg).await
    }

    async fn can_clone(&self, spec: &SliceSpec) -> Result<bool, SliceFault> {
        let adapter = self.adapter(spec)?;
        let cfg = AdapterConfig {
            admin_url: spec.admin_url.clone(),
            options: spec.options.clone(),
            buckets: spec.buckets.clone(),
            ..AdapterConfig::default()
        };
        adapter
            .capabilities(&cfg)
            .await
            .map(|c| c.clone)
            .map_err(fault)
    }

    async fn clone_into(
        &self,
        from: &SliceSpec,
        to: &SliceSpec,
    ) -> Result<SliceAddress, SliceFault> {
        let adapter = self.adapter(to)?;
        let cfg = self.config(to, adapter.as_ref()).await?;
        let src = slice_of(from);
        let dst = slice_of(to);
        let home = self.home()?;
        // The golden template too: one named alike by two homes before homes had an
        // identity is adopted by the first to clone from it; another home's is not copied
        // (its home may drop it mid-copy): the world is migrated and seeded instead.
        if !named_by(&src.name, &home) {
            self.refuse_others(adapter.as_ref(), &src, &cfg, &home)
                .await?;
            self.claim(adapter.as_ref(), &src, &cfg, &home).await?;
        }
        self.refuse_others(adapter.as_ref(), &dst, &cfg, &home)
            .await?;
        adapter.clone_slice(&src, &dst, &cfg).await.map_err(fault)?;
        self.claim(adapter.as_ref(), &dst, &cfg, &home).await?;
        address(adapter.as_ref(), &dst, to, cfg).await
    }

    async fn seal(&self, template: &SliceSpec) -> Result<(), SliceFault> {
        let adapter = self.adapter(template)?;
        let cfg = self.config(template, adapter.as_ref()).await?;
        let slice = slice_of(template);
        adapter.seal_template(&slice, &cfg).await.map_err(fault)
    }

    fn provisions_once(&self, spec: &SliceSpec) -> bool {
        // External adapters are written to binky 0.1.2's contract: provision once per world,
        // not necessarily idempotent.
        !self.registry.is_builtin(&spec.adapter)
    }

    fn unanswered(&self, admin_url: &str) -> Option<String> {
        self.answers.why_not(admin_url)
    }

    async fn exists(&self, spec: &SliceSpec) -> Result<Option<bool>, SliceFault> {
        let adapter = self.adapter(spec)?;
        // A slice with a server of its own, or on a managed server that is not running, is
        // the server watch's to look after, not asked here (asking would start a server
        // stopped by `binky servers stop`): nothing can be told of it.
        if self.wants_own_server(spec, adapter.as_ref())
            || self.on_a_managed_server_not_running(spec, adapter.as_ref())?
        {
            return Ok(None);
        }
        let cfg = self.config(spec, adapter.as_ref()).await?;
        let slice = slice_of(spec);
        adapter.exists(&slice, &cfg).await.map_err(fault)
    }

    async fn pause(&self, spec: &SliceSpec) -> Result<bool, SliceFault> {
        let Some(kind) = self.kind(spec) else {
            return Ok(false);
        };
        let made_there = self.made_on_own_server(spec, kind)?;
        // Stopped either way: one left from before the slice's isolation changed must not
        // outlive the world's run.
        let had_one = self
            .servers
            .stop_world(kind, &spec.slice)
            .await
            .map_err(server_fault)?;
        Ok(had_one && made_there)
    }

    async fn teardown(&self, spec: &SliceSpec) -> Result<Teardown, SliceFault> {
        let adapter = self.adapter(spec)?;
        let slice = slice_of(spec);
        // A server of the slice's own goes with its files, whichever server the slice was
        // last made on (its isolation may have changed since).
        let own = match self.kind(spec) {
            Some(kind) => {
                let made_there = self.made_on_own_server(spec, kind)?;
                self.servers
                    .remove_world(kind, &spec.slice)
                    .await
                    .map_err(server_fault)?;
                made_there
            }
            None => false,
        };
        if own {
            return Ok(Teardown::Dropped);
        }
        // The slice controller passes the server the slice was made on (recorded); one
        // made before any was recorded is looked for where its config says.
        // On binky's own server, stopped (`binky servers stop`): started for the drop, and
        // stopped again after it.
        let lent = match &spec.admin_url {
            Some(url) => self.servers.for_drop(url).await.map_err(server_fault)?,
            None => None,
        };
        let dropped = self.teardown_on(spec, adapter.as_ref(), &slice).await;
        if let Some(lent) = lent {
            self.servers.give_back(lent).await;
        }
        dropped
    }
}

impl RealSlices {
    /// Drop `slice` (of `spec`) with `adapter` where it was made.
    async fn teardown_on(
        &self,
        spec: &SliceSpec,
        adapter: &dyn Adapter,
        slice: &Slice,
    ) -> Result<Teardown, SliceFault> {
        let cfg = match &spec.admin_url {
            Some(url) => AdapterConfig {
                admin_url: Some(url.clone()),
                options: spec.options.clone(),
                buckets: spec.buckets.clone(),
                recorded: self.recorded(spec, url).map_err(store_fault)?,
                ..AdapterConfig::default()
            },
            None => match self.admin_url_from_env(spec) {
                Some(url) => AdapterConfig {
                    recorded: self.recorded(spec, &url).map_err(store_fault)?,
                    admin_url: Some(url),
                    options: spec.options.clone(),
                    buckets: spec.buckets.clone(),
                    ..AdapterConfig::default()
                },
                // A world's own server, gone above; else the shared one.
                None if self.wants_own_server(spec, adapter) => return Ok(Teardown::Dropped),
                None => self.config(spec, adapter).await?,
            },
        };
        // A slice named alike before homes had an identity, which another home adopted:
        // that home's, left as it is.
        let home = self.home()?;
        if let Some(other) = self.other_maker(adapter, slice, &cfg, &home).await? {
            return Ok(Teardown::OtherHome(other));
        }
        adapter.teardown(slice, &cfg).await.map_err(fault)?;
        Ok(Teardown::Dropped)
    }
}
