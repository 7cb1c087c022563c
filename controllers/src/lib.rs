//! binky-controllers: the desired-state store, the reconcile runtime, admission, and the
//! controllers that converge reality, written against small traits for their effects
//! (git, ports, processes) so they build fast and test with fakes.

#![warn(missing_docs)]

pub mod adapter;
pub mod admission;
pub mod approval;
pub mod dirty;
pub mod env;
pub mod gate;
pub mod git;
pub mod glob;
pub mod golden;
pub mod hold;
pub mod inplace;
pub mod limits;
pub mod machine;
pub mod needs;
pub mod phase;
pub mod port;
pub mod process;
pub mod random;
pub mod registry;
pub mod replica;
pub mod route;
pub mod runtime;
pub mod settings;
pub mod shared;
pub mod slice;
pub mod spec;
pub mod store;
pub mod supervisor;
pub mod template;
#[cfg(test)]
pub mod testing;
#[cfg(test)]
mod tests;
pub mod tokens;
pub mod took;
pub mod url;
pub mod whole_file;
pub mod worktree;
