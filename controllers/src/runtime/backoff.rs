//! Backoff: per-key error backoff (the one place the `backoff` crate is used) and the plain
//! doubling schedule that other retry loops (a process's restarts, a managed server's
//! restarts, a starting server's readiness polls) count their waits with.
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

/// The wait after the `attempt`-th failure in a row (1 for the first): `first`, doubled for
/// each failure after it, never above `max`. No jitter: a process's restart delay is shown
/// to its user and recorded.
pub fn doubling_delay(first: Duration, attempt: u32, max: Duration) -> Duration {
    let exp = attempt.saturating_sub(1).min(31);
    first.saturating_mul(1u32 << exp).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubling_delay_starts_at_the_first_wait_and_stops_at_the_cap() {
        let ms = Duration::from_millis;
        let waits: Vec<_> = (0..=6)
            .map(|n| doubling_delay(ms(500), n, ms(5_000)))
            .collect();
        assert_eq!(
            waits,
            [
                ms(500),
                ms(500),
                ms(1_000),
                ms(2_000),
                ms(4_000),
                ms(5_000),
                ms(5_000)
            ]
        );
        assert_eq!(doubling_delay(ms(500), u32::MAX, ms(30_000)), ms(30_000));
    }

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
