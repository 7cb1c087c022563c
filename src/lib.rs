//! binky: an isolated local world for every git worktree — ports nobody chose by hand, its
//! own env and URLs, and supervised processes — converged by a daemon from desired state.
//!
//! This crate holds the CLI, the daemon and the real effects (git, processes, ports); the
//! store, the reconcile runtime and the controllers live in `binky-controllers`.

#![warn(missing_docs)]

pub mod adapters;
pub mod agent_made;
pub mod apply;
pub mod bootstrap;
pub mod caller_env;
pub mod check;
pub mod cli;
pub mod config;
pub mod credentials;
pub mod daemon;
pub mod dashboard;
pub mod duration;
pub mod failure;
pub mod git;
pub mod hosts;
pub mod init;
pub mod logging;
pub mod machine;
pub mod paths;
pub mod person;
pub mod ports;
pub mod protocol;
pub use binky_proxy as proxy;
pub mod reach;
pub mod requests;
pub mod scrub;
pub mod secrets;
pub mod servers;
pub mod slices;
pub mod supervisor;
pub mod trash;
pub mod view;
pub mod workers;
