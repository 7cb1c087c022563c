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

/// What tearing a slice down came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Teardown {
    /// It is gone (or was already).
    Dropped,
    /// Its server records another binky home as its maker (this home's identity is not the
    /// one there): nothing of it was touched. The other home's identity.
    OtherHome(String),
}

/// The slice effects: adapters, and managed servers behind them.
pub trait SliceEffects: Send + Sync + 'static {
    /// Make the slice if it does not exist, and say where it is.
    fn provision(
        &self,
        spec: &SliceSpec,
    ) -> impl Future<Output = Result<SliceAddress, SliceFault>> + Send;
    /// Remove the slice and its credentials, unless its server records another binky home
    /// as its maker: then it is left as it is, and the answer names that home.
    fn teardown(
        &self,
        spec: &SliceSpec,
    ) -> impl Future<Output = Result<Teardown, SliceFault>> + Send;
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
    /// Why the server at `admin_url` (a server binky.toml or the environment names, not a
    /// managed one) did not answer when it was last asked, if it did not: the daemon asks
    /// each such server a slice lives on every few seconds, once for all its worlds. The
    /// default: nothing asks, so nothing is known against it.
    fn unanswered(&self, admin_url: &str) -> Option<String> {
        let _ = admin_url;
        None
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

/// A new slice's name: `bk_<home>_<project>_<world>_<service>`, lower case, `[a-z0-9_]`, at
/// most 63 characters (PostgreSQL's limit, the tightest of the servers here); a name that
/// had to be shortened ends in a hash of the full one, so it stays unique. `home` is the
/// home's identity (`store::home_id`: eight characters of `[a-z2-7]`), first so that no
/// shortening cuts it off: two homes sharing a server never make the same name, whatever
/// their projects and worlds are called. A slice keeps the name its record holds (one made
/// before homes had an identity keeps `bk_<project>_<world>_<service>`).
pub fn slice_name(home: &str, project: &str, world: &str, service: &str) -> String {
    let full = format!("bk_{home}_{project}_{world}_{service}");
    let name: String = full
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
    if name.len() > MAX_NAME
        || name_cost(&name) > MAX_NAME_COST
        || name != full.to_ascii_lowercase()
    {
        let digest = Sha256::digest(full.as_bytes());
        let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
        // `_` and the hash cost 10: the head keeps the rest.
        let head = head_costing(&name, MAX_NAME_COST - 10);
        return format!("{}_{hash}", head.trim_end_matches('_'));
    }
    name
}

/// The longest a slice's name is: PostgreSQL's identifier limit, the tightest length.
pub const MAX_NAME: usize = 63;

/// The most a slice's name may cost (see [`name_cost`]): MySQL's 64-character limit on
/// the database name of `GRANT … ON db.*`, where each `_` is written `\_` (it would match
/// any character otherwise).
pub const MAX_NAME_COST: usize = 64;

/// What `name` (`[a-z0-9_]`) costs where it is longest: its length, and one more for each
/// `_`, which MySQL's grants escape. A name within [`MAX_NAME`] and [`MAX_NAME_COST`] fits
/// every server binky knows.
pub fn name_cost(name: &str) -> usize {
    name.len() + name.bytes().filter(|b| *b == b'_').count()
}

/// The longest start of `name` (`[a-z0-9_]`) costing at most `budget`.
pub fn head_costing(name: &str, budget: usize) -> &str {
    let mut cost = 0;
    for (i, b) in name.bytes().enumerate() {
        cost += if b == b'_' { 2 } else { 1 };
        if cost > budget {
            return &name[..i];
        }
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

    const HOME: &str = "h2k4m6p7";

    #[test]
    fn slice_names_are_safe_short_and_distinct() {
        let dashed = slice_name(HOME, "acme", "login-fix", "db");
        assert!(
            dashed.starts_with("bk_h2k4m6p7_acme_login_fix_db_")
                && dashed.len() == "bk_h2k4m6p7_acme_login_fix_db_".len() + 8,
            "{dashed}"
        );
        assert_eq!(slice_name(HOME, "acme", "login-fix", "db"), dashed);
        let a = slice_name(HOME, "acme", "feat/x", "db");
        let b = slice_name(HOME, "acme", "feat_x", "db");
        assert_ne!(a, b, "two worlds share a slice");
        assert_eq!(slice_name(HOME, "acme", "w", "db"), "bk_h2k4m6p7_acme_w_db");
        let long = slice_name(HOME, &"p".repeat(40), &"w".repeat(40), "db");
        assert!(long.len() <= 63, "{long}");
        // Many `_`: within MySQL's grant limit once each is escaped.
        let underscored = slice_name(HOME, "a-b-c-d-e-f-g-h", "i-j-k-l-m-n-o-p-q-r-s", "t_u_v");
        assert!(name_cost(&underscored) <= MAX_NAME_COST, "{underscored}");
        assert!(underscored.starts_with("bk_h2k4m6p7_a_b_"), "{underscored}");
        for n in [a, b, long, underscored] {
            assert!(n.len() <= MAX_NAME && name_cost(&n) <= MAX_NAME_COST, "{n}");
            assert!(
                n.bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_'),
                "{n}"
            );
        }
    }

    #[test]
    fn two_homes_never_name_a_slice_alike_and_a_shortened_name_keeps_its_home() {
        let other = "a3b5c7d2";
        for (p, w) in [
            ("team", "feat-a"),
            ("team", "feat_a"),
            (&*"p".repeat(60), &*"w".repeat(60)),
        ] {
            let (mine, theirs) = (slice_name(HOME, p, w, "db"), slice_name(other, p, w, "db"));
            assert_ne!(mine, theirs);
            assert!(mine.starts_with("bk_h2k4m6p7_"), "{mine}");
            assert!(theirs.starts_with("bk_a3b5c7d2_"), "{theirs}");
            assert!(mine.len() <= 63 && theirs.len() <= 63, "{mine} {theirs}");
        }
    }

    #[test]
    fn secrets_are_random() {
        let a = random_secret().unwrap();
        assert_eq!(a.len(), 36);
        assert_ne!(a, random_secret().unwrap());
    }
}
