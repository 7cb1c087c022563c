//! Waiting for a condition instead of sleeping a fixed time.

use std::time::{Duration, Instant};

/// Wait until `f` holds, or panic naming `what`.
pub fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    if !wait_for(limit, Duration::from_millis(50), &mut f) {
        panic!("timed out after {limit:?} waiting for: {what}");
    }
}

/// Whether `f` held within `limit`, checked every `every`.
pub fn wait_for(limit: Duration, every: Duration, mut f: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if f() {
            return true;
        }
        std::thread::sleep(every);
    }
    false
}
