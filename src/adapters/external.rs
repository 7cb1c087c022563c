//! External adapters: `binky-adapter-<name> <verb>` (being written).

use super::{Adapter, AdapterConfig, AdapterError, Address, BoxFuture, Capabilities, Slice};

/// An external adapter executable.
pub struct External {
    name: String,
}

impl External {
    /// The external adapter `binky-adapter-<name>` on PATH, if there is one.
    pub fn find(name: &str) -> Option<External> {
        let _ = name;
        None
    }
}

impl Adapter for External {
    fn names(&self) -> &'static [&'static str] {
        &[]
    }
    fn capabilities<'a>(
        &'a self,
        _cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Capabilities, AdapterError>> {
        Box::pin(async { Ok(Capabilities::default()) })
    }
    fn provision<'a>(
        &'a self,
        _slice: &'a Slice,
        _cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<(), AdapterError>> {
        Box::pin(async move {
            Err(AdapterError::Config(format!(
                "external adapter {} not written yet",
                self.name
            )))
        })
    }
    fn resolve<'a>(
        &'a self,
        _slice: &'a Slice,
        _cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Address, AdapterError>> {
        Box::pin(async move {
            Err(AdapterError::Config(format!(
                "external adapter {} not written yet",
                self.name
            )))
        })
    }
    fn teardown<'a>(
        &'a self,
        _slice: &'a Slice,
        _cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<(), AdapterError>> {
        Box::pin(async move {
            Err(AdapterError::Config(format!(
                "external adapter {} not written yet",
                self.name
            )))
        })
    }
}
