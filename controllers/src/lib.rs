//! binky-controllers: the desired-state store, the reconcile runtime, admission, and the
//! controllers that converge reality, written against small traits for their effects
//! (git, ports, processes) so they build fast and test with fakes.

#![warn(missing_docs)]

pub mod admission;
pub mod dirty;
pub mod env;
pub mod gate;
pub mod git;
pub mod glob;
pub mod golden;
pub mod phase;
pub mod port;
pub mod process;
pub mod registry;
pub mod route;
pub mod runtime;
pub mod settings;
pub mod slice;
pub mod spec;
pub mod store;
#[cfg(test)]
pub mod testing;
#[cfg(test)]
mod tests;
pub mod tokens;

/// `scheme://user:pw@host:port/…` → `scheme://host:port` (a server, for keys and messages).
pub fn redact_server(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    format!("{scheme}://{host}")
}
pub mod worktree;
