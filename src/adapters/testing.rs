//! Helpers shared by the adapters' unit tests.

use super::{AdapterConfig, Slice};

/// A config with only `admin_url` set.
pub fn cfg(url: &str) -> AdapterConfig {
    AdapterConfig {
        admin_url: Some(url.to_owned()),
        ..AdapterConfig::default()
    }
}

/// A slice named `name` with `secret`.
pub fn slice(name: &str, secret: &str) -> Slice {
    Slice {
        name: name.to_owned(),
        secret: secret.to_owned(),
    }
}
