//! What differs between operating systems, behind one set of functions: each need binky has of
//! the system (a file only its owner reads, a port several threads listen on, the user's name,
//! …) is one function here, with one implementation per system. Nothing outside this crate
//! names `nix`, `libc`, `std::os::unix`, `std::os::windows`, `/proc` or cgroups; the files
//! that still do are listed in the test that holds this (tests/integration/layers.rs) until
//! they move here.
//!
//! Where a system has no way to do what is asked, the function says so in its return value
//! (`false`, `None`) and its doc comment says what binky does instead, so callers make the
//! choice once, in words a user can be told.

pub mod clone;
pub mod fs;
pub mod install;
pub mod io;
pub mod ipc;
pub mod job;
pub mod limits;
pub mod lock;
pub mod machine;
pub mod net;
pub mod owner;
pub mod proc;
pub mod process;
pub mod signal;
#[cfg(any(target_os = "macos", target_os = "freebsd", target_os = "dragonfly"))]
mod sysctl;
pub mod trust;
pub mod user;
