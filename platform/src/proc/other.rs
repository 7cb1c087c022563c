//! Unix other than Linux and macOS (the BSDs): nothing is read of their processes yet; each
//! answer is "cannot tell" (`None`, empty), and the one that can be done portably (a group
//! is gone, a kill) is.

use std::path::PathBuf;

use super::{Stat, Use};

/// Nothing is read of sockets here yet.
pub type Sockets = ();

pub fn sockets_empty(_: &Sockets) -> bool {
    true
}

pub fn stat(_pid: u32) -> Option<Stat> {
    None
}

pub fn started(_pid: u32) -> Option<(u64, bool)> {
    None
}

pub fn pids() -> Vec<u32> {
    Vec::new()
}

pub fn parents() -> Vec<(u32, u32)> {
    Vec::new()
}

pub fn group_members(_pgid: u32) -> Vec<u32> {
    Vec::new()
}

pub fn group_gone(pgid: u32) -> bool {
    let pgid = nix::unistd::Pid::from_raw(pgid as i32);
    nix::sys::signal::killpg(pgid, None).is_err()
}

pub fn environ_var(_pid: u32, _key: &str) -> Option<String> {
    None
}

pub fn rss_bytes(_pid: u32) -> Option<u64> {
    None
}

pub fn exe(_pid: u32) -> Option<PathBuf> {
    None
}

pub fn all_use() -> Vec<Use> {
    Vec::new()
}

pub fn clock_ticks_per_second() -> u64 {
    100
}

pub fn page_size() -> u64 {
    4096
}

pub fn sockets_on(_port: u16) -> Option<Sockets> {
    None
}

pub fn one_holds(_pids: &[u32], _sockets: &Sockets) -> bool {
    false
}

pub fn holders(_sockets: &Sockets) -> Vec<u32> {
    Vec::new()
}

pub fn listening_ports(_pids: &[u32]) -> Vec<u16> {
    Vec::new()
}

pub fn kill(pid: u32) -> std::io::Result<()> {
    crate::signal::send(pid, "SIGKILL")
}
