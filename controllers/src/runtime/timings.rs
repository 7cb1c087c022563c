//! What each controller's work costs, counted as it runs: how many reconciles, how long they
//! took together and at most, and the same of its housekeeping. `binky daemon status` and
//! `binky metrics` show them, so where a busy daemon's time goes is read, not guessed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One controller's counters since the daemon started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timing {
    /// Reconciles run (finished or panicked).
    pub reconciles: u64,
    /// Their time together (wall clock, from start to end; waits on the store included), µs.
    pub busy_us: u64,
    /// The longest one, µs.
    pub max_us: u64,
    /// Housekeeping runs.
    pub housekeeps: u64,
    /// Their time together, µs.
    pub housekeep_us: u64,
}

/// Every controller's [`Timing`], shared by the schedulers that count and whoever shows them.
#[derive(Clone, Default)]
pub struct Timings(Arc<Mutex<BTreeMap<&'static str, Timing>>>);

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Timings {
    fn with(&self, controller: &'static str, f: impl FnOnce(&mut Timing)) {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f(all.entry(controller).or_default());
    }

    /// A reconcile of `controller` took `took`.
    pub fn reconciled(&self, controller: &'static str, took: Duration) {
        let us = micros(took);
        self.with(controller, |t| {
            t.reconciles += 1;
            t.busy_us = t.busy_us.saturating_add(us);
            t.max_us = t.max_us.max(us);
        });
    }

    /// A housekeeping run of `controller` took `took`.
    pub fn housekept(&self, controller: &'static str, took: Duration) {
        self.with(controller, |t| {
            t.housekeeps += 1;
            t.housekeep_us = t.housekeep_us.saturating_add(micros(took));
        });
    }

    /// The counters now, by controller.
    pub fn snapshot(&self) -> BTreeMap<String, Timing> {
        let all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }
}
