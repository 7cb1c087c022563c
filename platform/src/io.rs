//! Waiting on standard input: the log scrubber writes an unfinished line once its service
//! has been quiet for a moment.

/// Whether standard input has nothing to read for `timeout_ms`: `poll(2)` on Unix. Elsewhere
/// always false for now: an unfinished line waits for the next input or the end.
pub fn stdin_quiet_for(timeout_ms: u16) -> bool {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        let stdin = std::io::stdin();
        let mut fds = [nix::poll::PollFd::new(
            stdin.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        matches!(
            nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(timeout_ms)),
            Ok(0)
        )
    }
    #[cfg(not(unix))]
    {
        let _ = timeout_ms;
        false
    }
}
