//! Interrupts for the benchmarks: a flag, so that Ctrl-C unwinds through the teardown guards
//! (servers, daemons, sandboxes) instead of killing the bench with them still running.

use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

use crate::Res;

/// Set by SIGINT, SIGTERM or SIGHUP once [`install_signal_handlers`] ran.
pub static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: nix::libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Make SIGINT, SIGTERM and SIGHUP set [`STOP`].
pub fn install_signal_handlers() {
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        let _ = unsafe { sigaction(sig, &action) };
    }
}

/// `Err("interrupted")` once a signal came.
pub fn check_stop() -> Res<()> {
    if STOP.load(Ordering::SeqCst) {
        Err("interrupted".into())
    } else {
        Ok(())
    }
}

/// Sleep a little; an interrupt ends the wait.
pub fn pause(d: std::time::Duration) -> Res<()> {
    check_stop()?;
    std::thread::sleep(d);
    check_stop()
}
