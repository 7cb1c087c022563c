//! Per-key error backoff, the one place the `backoff` crate is used.
//!
//! `backoff` 0.4 carries an "unmaintained" advisory (RUSTSEC-2025-0012, and
//! RUSTSEC-2024-0384 for the `instant` crate it pulls in); no vulnerability. It stays behind
//! this small type so swapping it for `backon` touches only this file.

use std::time::Duration;

use backoff::backoff::Backoff;
use backoff::{ExponentialBackoff, ExponentialBackoffBuilder};

/// The first retry after an error.
pub const INITIAL: Duration = Duration::from_millis(200);
/// Retries never wait longer than this.
pub const MAX: Duration = Duration::from_secs(30);

/// The retry schedule of one key: exponential, jittered, capped, never giving up.
pub struct KeyBackoff {
    inner: ExponentialBackoff,
    attempts: u32,
}

impl Default for KeyBackoff {
    fn default() -> Self {
        KeyBackoff {
            inner: ExponentialBackoffBuilder::new()
                .with_initial_interval(INITIAL)
                .with_multiplier(2.0)
                .with_randomization_factor(0.2)
                .with_max_interval(MAX)
                .with_max_elapsed_time(None)
                .build(),
            attempts: 0,
        }
    }
}

impl KeyBackoff {
    /// The delay before the next attempt after one more failure.
    pub fn next_delay(&mut self) -> Duration {
        self.attempts += 1;
        self.inner.next_backoff().unwrap_or(MAX)
    }

    /// Failures since the last success.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_and_stay_capped() {
        let mut b = KeyBackoff::default();
        let first = b.next_delay();
        assert!(first <= INITIAL.mul_f64(1.21), "{first:?}");
        let mut last = first;
        for _ in 0..20 {
            last = b.next_delay();
        }
        assert!(last <= MAX.mul_f64(1.21), "{last:?}");
        assert!(last >= MAX.mul_f64(0.79), "{last:?}");
        assert_eq!(b.attempts(), 21);
    }
}
