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

    async fn admin_url(&self, spec: &SliceSpec) -> Result<Option<String>, SliceFault> {
        if spec.admin_url.is_some() {
            return Ok(spec.admin_url.clone());
        }
        if !self.registry.is_builtin(&spec.adapter) {
            return Ok(None);
        }
        match Kind::for_adapter(&spec.adapter) {
            // binky 0.1.2's `$BINKY_MYSQL_URL` (in the daemon's environment) names the
            // server when the service gives none: the adapter reads it, and no managed
            // server is started.
            Some(Kind::Mysql)
                if std::env::var(crate::adapters::mysql::ENV_URL)
                    .is_ok_and(|v| !v.trim().is_empty()) =>
            {
                Ok(None)
            }
            Some(kind) => self.servers.ensure(kind).await.map(Some).map_err(|e| {
                if e.permanent() {
                    SliceFault::Permanent(e.to_string())
                } else {
                    SliceFault::Transient(e.to_string())
                }
            }),
            None => Ok(None),
        }
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
        SliceFault::Transient(e.to_string())
    } else {
        SliceFault::Permanent(e.to_string())
    }
}

impl SliceEffects for RealSlices {
    async fn provision(&self, spec: &SliceSpec) -> Result<SliceAddress, SliceFault> {
        let adapter = self.adapter(spec)?;
        let admin_url = self.admin_url(spec).await?;
        let cfg = AdapterConfig {
            admin_url: admin_url.clone(),
            options: spec.options.clone(),
            buckets: spec.buckets.clone(),
        };
        let slice = Slice {
            name: spec.slice.clone(),
            secret: spec.secret.clone(),
        };
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
        let cfg = AdapterConfig {
            admin_url: spec.admin_url.clone(),
            options: spec.options.clone(),
            buckets: spec.buckets.clone(),
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
        let admin_url = self.admin_url(to).await?;
        let cfg = AdapterConfig {
            admin_url: admin_url.clone(),
            options: to.options.clone(),
            buckets: to.buckets.clone(),
        };
        let src = Slice {
            name: from.slice.clone(),
            secret: from.secret.clone(),
        };
        let dst = Slice {
            name: to.slice.clone(),
            secret: to.secret.clone(),
        };
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
        let cfg = AdapterConfig {
            admin_url: self.admin_url(template).await?,
            options: template.options.clone(),
            buckets: template.buckets.clone(),
        };
        let slice = Slice {
            name: template.slice.clone(),
            secret: template.secret.clone(),
        };
        adapter.seal_template(&slice, &cfg).await.map_err(fault)
    }

    async fn exists(&self, spec: &SliceSpec) -> Result<Option<bool>, SliceFault> {
        let adapter = self.adapter(spec)?;
        let cfg = AdapterConfig {
            admin_url: self.admin_url(spec).await?,
            options: spec.options.clone(),
            buckets: spec.buckets.clone(),
        };
        let slice = Slice {
            name: spec.slice.clone(),
            secret: spec.secret.clone(),
        };
        adapter.exists(&slice, &cfg).await.map_err(fault)
    }

    async fn teardown(&self, spec: &SliceSpec) -> Result<(), SliceFault> {
        let adapter = self.adapter(spec)?;
        let admin_url = self.admin_url(spec).await?;
        let cfg = AdapterConfig {
            admin_url,
            options: spec.options.clone(),
            buckets: spec.buckets.clone(),
        };
        let slice = Slice {
            name: spec.slice.clone(),
            secret: spec.secret.clone(),
        };
        adapter.teardown(&slice, &cfg).await.map_err(fault)
    }
}
