//! What the slice and golden controllers ask of adapters: the spec of one slice, where a
//! made slice is, why making one failed, and the effects trait the daemon implements; and
//! ([`SliceWork`]) the work both controllers do with them.

mod work;

use std::collections::BTreeMap;
use std::future::Future;

use sha2::{Digest, Sha256};

pub use self::work::SliceWork;
pub(crate) use self::work::{slice_spec, unset_settings, CommandError};

/// Everything an adapter needs to make or find one slice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceSpec {
    /// Adapter name.
    pub adapter: String,
    /// The slice's name.
    pub slice: String,
    /// Its password.
    pub secret: String,
    /// The server's admin address (tokens resolved); none: binky's managed server.
    pub admin_url: Option<String>,
    /// `options`, tokens resolved.
    pub options: BTreeMap<String, String>,
    /// `buckets`.
    pub buckets: Vec<String>,
    /// `PATH` of the `binky up` that wrote the world: where external adapters are looked
    /// up (not the daemon's own `PATH`, which is whatever its first command had).
    pub search_path: Option<String>,
}

/// A provisioned slice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceAddress {
    /// The address a service's client takes as is.
    pub url: String,
    /// Extra tokens (`prefix`, …).
    pub tokens: BTreeMap<String, String>,
    /// The admin address actually used (a managed server's, when none was given).
    pub admin_url: Option<String>,
}

/// The adapter's own error behind a [`SliceFault`], kept whole with its sources.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Why a slice could not be made or dropped: the adapter's error, and whether retrying may
/// help.
#[derive(Debug, thiserror::Error)]
pub enum SliceFault {
    /// Retrying may help (the server is down, the credentials are refused).
    #[error(transparent)]
    Transient(Cause),
    /// Retrying will not help until the configuration changes.
    #[error(transparent)]
    Permanent(Cause),
}

/// The slice effects: adapters, and managed servers behind them.
pub trait SliceEffects: Send + Sync + 'static {
    /// Make the slice if it does not exist, and say where it is.
    fn provision(
        &self,
        spec: &SliceSpec,
    ) -> impl Future<Output = Result<SliceAddress, SliceFault>> + Send;
    /// Remove the slice and its credentials.
    fn teardown(&self, spec: &SliceSpec) -> impl Future<Output = Result<(), SliceFault>> + Send;
    /// Can this adapter copy a slice server-side?
    fn can_clone(&self, spec: &SliceSpec) -> impl Future<Output = Result<bool, SliceFault>> + Send;
    /// Copy the template `from` into the new slice `to`, and say where it is.
    fn clone_into(
        &self,
        from: &SliceSpec,
        to: &SliceSpec,
    ) -> impl Future<Output = Result<SliceAddress, SliceFault>> + Send;
    /// Make a migrated and seeded slice a template (closed, ready to be copied).
    fn seal(&self, template: &SliceSpec) -> impl Future<Output = Result<(), SliceFault>> + Send;
    /// Does `provision` run once per slice (binky 0.1.2's contract for external adapters,
    /// which need not be idempotent), instead of again at each new generation to heal it?
    fn provisions_once(&self, spec: &SliceSpec) -> bool {
        let _ = spec;
        false
    }
    /// Stop what the slice runs only while its world runs (a server of its own), keeping
    /// its data; the next `provision` starts it again. Whether the slice has such a thing
    /// (stopped now or before); the default: nothing to stop.
    fn pause(&self, spec: &SliceSpec) -> impl Future<Output = Result<bool, SliceFault>> + Send {
        let _ = spec;
        async { Ok(false) }
    }
    /// Is the slice still on its server? `None`: the adapter cannot tell.
    fn exists(
        &self,
        spec: &SliceSpec,
    ) -> impl Future<Output = Result<Option<bool>, SliceFault>> + Send {
        let _ = spec;
        async { Ok(None) }
    }
}

/// A slice name: `bk_<project>_<world>_<service>`, lower case, `[a-z0-9_]`, at most 63
/// characters (PostgreSQL's limit, the tightest of the servers here); a name that had to be
/// shortened ends in a hash of the full one, so it stays unique.
pub fn slice_name(project: &str, world: &str, service: &str) -> String {
    let full = format!("bk_{project}_{world}_{service}");
    let mut name: String = full
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.len() > 63 || name != full.to_ascii_lowercase() {
        let digest = Sha256::digest(full.as_bytes());
        let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
        name.truncate(54);
        name = format!("{}_{hash}", name.trim_end_matches('_'));
    }
    name
}

/// A new random secret (hex, 144 bits, from the kernel's CSPRNG; an error when the kernel
/// gives none, never a weaker value).
pub fn random_secret() -> Result<String, crate::random::RandomError> {
    crate::random::hex(18)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_names_are_safe_short_and_distinct() {
        let dashed = slice_name("acme", "login-fix", "db");
        assert!(
            dashed.starts_with("bk_acme_login_fix_db_")
                && dashed.len() == "bk_acme_login_fix_db_".len() + 8,
            "{dashed}"
        );
        assert_eq!(slice_name("acme", "login-fix", "db"), dashed);
        let a = slice_name("acme", "feat/x", "db");
        let b = slice_name("acme", "feat_x", "db");
        assert_ne!(a, b, "two worlds share a slice");
        assert_eq!(slice_name("acme", "w", "db"), "bk_acme_w_db");
        let long = slice_name(&"p".repeat(40), &"w".repeat(40), "db");
        assert!(long.len() <= 63, "{long}");
        for n in [a, b, long] {
            assert!(
                n.bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_'),
                "{n}"
            );
        }
    }

    #[test]
    fn secrets_are_random() {
        let a = random_secret().unwrap();
        assert_eq!(a.len(), 36);
        assert_ne!(a, random_secret().unwrap());
    }
}
