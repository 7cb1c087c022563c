//! The real slice effects: adapters from the registry, on the server the service names or
//! on binky's managed server of that kind.

use std::sync::Arc;

use binky_controllers::slice::{SliceAddress, SliceEffects, SliceFault, SliceSpec};

use crate::adapters::{AdapterConfig, AdapterError, Registry, Slice};
use crate::servers::{Kind, Servers};

/// Adapters plus managed servers.
pub struct RealSlices {
    registry: Registry,
    servers: Arc<Servers>,
}

impl RealSlices {
    /// Slices made with `registry`, on `servers` when no `admin_url` is given.
    pub fn new(registry: Registry, servers: Arc<Servers>) -> Self {
        RealSlices { registry, servers }
    }

    /// Where `spec`'s slice lives: its `admin_url`; else, for a built-in adapter, the server
    /// binky 0.1.2's environment variable names (read here, once, and recorded with the
    /// slice, so it is dropped where it was made), else binky's managed server of its kind.
    async fn admin_url(&self, spec: &SliceSpec) -> Result<Option<String>, SliceFault> {
        if spec.admin_url.is_some() {
            return Ok(spec.admin_url.clone());
        }
        if !self.registry.is_builtin(&spec.adapter) {
            return Ok(None);
        }
        let from_env = crate::adapters::admin_url_env(&spec.adapter)
            .and_then(|var| std::env::var(var).ok())
            .map(|url| url.trim().to_owned())
            .filter(|url| !url.is_empty());
        if from_env.is_some() {
            return Ok(from_env);
        }
        match Kind::for_adapter(&spec.adapter) {
            Some(kind) => self.servers.ensure(kind).await.map(Some).map_err(|e| {
                if e.permanent() {
                    SliceFault::Permanent(Box::new(e))
                } else {
                    SliceFault::Transient(Box::new(e))
                }
            }),
            None => Ok(None),
        }
    }

    /// The adapter's view of `spec`, on `admin_url`.
    fn config(spec: &SliceSpec, admin_url: Option<String>) -> AdapterConfig {
        AdapterConfig {
            admin_url,
            options: spec.options.clone(),
            buckets: spec.buckets.clone(),
        }
    }
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
                let name = spec.adapter.split('@').next().unwrap_or(&spec.adapter);
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

impl SliceEffects for RealSlices {
    async fn provision(&self, spec: &SliceSpec) -> Result<SliceAddress, SliceFault> {
        let adapter = self.adapter(spec)?;
        let admin_url = self.admin_url(spec).await?;
        let cfg = Self::config(spec, admin_url.clone());
        let slice = slice_of(spec);
        adapter.provision(&slice, &cfg).await.map_err(fault)?;
        let addr = adapter.resolve(&slice, &cfg).await.map_err(fault)?;
        Ok(SliceAddress {
            url: addr.url,
            tokens: addr.tokens,
            admin_url,
        })
    }

    async fn can_clone(&self, spec: &SliceSpec) -> Result<bool, SliceFault> {
        let adapter = self.adapter(spec)?;
        let cfg = Self::config(spec, spec.admin_url.clone());
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
        let admin_url = self.admin_url(to).await?;
        let cfg = Self::config(to, admin_url.clone());
        let src = slice_of(from);
        let dst = slice_of(to);
        adapter.clone_slice(&src, &dst, &cfg).await.map_err(fault)?;
        let addr = adapter.resolve(&dst, &cfg).await.map_err(fault)?;
        Ok(SliceAddress {
            url: addr.url,
            tokens: addr.tokens,
            admin_url,
        })
    }

    async fn seal(&self, template: &SliceSpec) -> Result<(), SliceFault> {
        let adapter = self.adapter(template)?;
        let cfg = Self::config(template, self.admin_url(template).await?);
        let slice = slice_of(template);
        adapter.seal_template(&slice, &cfg).await.map_err(fault)
    }

    fn provisions_once(&self, spec: &SliceSpec) -> bool {
        // binky 0.1.2 called an external adapter's provision once per world.
        !self.registry.is_builtin(&spec.adapter)
    }

    async fn exists(&self, spec: &SliceSpec) -> Result<Option<bool>, SliceFault> {
        let adapter = self.adapter(spec)?;
        let cfg = Self::config(spec, self.admin_url(spec).await?);
        let slice = slice_of(spec);
        adapter.exists(&slice, &cfg).await.map_err(fault)
    }

    async fn teardown(&self, spec: &SliceSpec) -> Result<(), SliceFault> {
        let adapter = self.adapter(spec)?;
        let cfg = Self::config(spec, self.admin_url(spec).await?);
        let slice = slice_of(spec);
        adapter.teardown(&slice, &cfg).await.map_err(fault)
    }
}
