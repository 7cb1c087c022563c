//! What binky reads of another process by its pid: its command line and its name.
//!
//! Linux reads `/proc/<pid>/cmdline` and `/proc/<pid>/comm`; elsewhere these are `None` for
//! now, and what uses them says it cannot tell (who holds a port, whether binky started a
//! process).

/// The arguments `pid` was started with, its program first, where the system says.
pub fn command_line(pid: u32) -> Option<Vec<String>> {
    #[cfg(target_os = "linux")]
    {
        let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        Some(split_cmdline(&raw))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// `/proc/<pid>/cmdline`'s arguments: each ends with a NUL (an empty argument is kept).
pub fn split_cmdline(raw: &[u8]) -> Vec<String> {
    let raw = raw.strip_suffix(&[0]).unwrap_or(raw);
    if raw.is_empty() {
        return Vec::new();
    }
    raw.split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// The short name of `pid`'s program (`postgres`, `node`), where the system says.
pub fn name(pid: u32) -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        Some(comm.trim().to_owned())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_splits_at_nuls_and_drops_the_trailing_one() {
        assert_eq!(split_cmdline(b"binky\0mcp\0--x\0"), ["binky", "mcp", "--x"]);
        assert_eq!(split_cmdline(b"sh\0-c\0\0x\0"), ["sh", "-c", "", "x"]);
        assert!(split_cmdline(b"").is_empty());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_seen_by_its_pid() {
        let me = std::process::id();
        let args = command_line(me).expect("our own command line");
        assert!(!args.is_empty());
        assert!(name(me).is_some_and(|n| !n.is_empty()));
    }
}
