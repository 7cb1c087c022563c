//! The `postgres` adapter (being written).

use super::{Adapter, AdapterConfig, AdapterError, Address, BoxFuture, Capabilities, Slice};

/// The postgres adapter.
pub struct Postgres;

impl Adapter for Postgres {
    fn names(&self) -> &'static [&'static str] {
        &["postgres"]
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
                "the postgres adapter is not written yet".into(),
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
                "the postgres adapter is not written yet".into(),
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
                "the postgres adapter is not written yet".into(),
            ))
        })
    }
}
