//! The `redis` adapter (being written).

use super::{Adapter, AdapterConfig, AdapterError, Address, BoxFuture, Capabilities, Slice};

/// The redis adapter.
pub struct Redis;

impl Adapter for Redis {
    fn names(&self) -> &'static [&'static str] {
        &["redis"]
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
        Box::pin(async {
            Err(AdapterError::Config(
                "the redis adapter is not written yet".into(),
            ))
        })
    }
    fn resolve<'a>(
        &'a self,
        _slice: &'a Slice,
        _cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Address, AdapterError>> {
        Box::pin(async {
            Err(AdapterError::Config(
                "the redis adapter is not written yet".into(),
            ))
        })
    }
    fn teardown<'a>(
        &'a self,
        _slice: &'a Slice,
        _cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<(), AdapterError>> {
        Box::pin(async {
            Err(AdapterError::Config(
                "the redis adapter is not written yet".into(),
            ))
        })
    }
}
