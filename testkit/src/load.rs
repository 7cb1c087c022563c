//! A CPU hog of a test's own: busy threads on every core for as long as it lives, so a test
//! can show that what it checks holds on a loaded machine (a CI run shares its cores with
//! other tests and builds), not only on an idle one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Busy threads; stopped and joined when dropped.
pub struct CpuHog {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<u64>>,
}

impl CpuHog {
    /// `per_core` busy threads for every core the machine has.
    pub fn start(per_core: usize) -> CpuHog {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..cores * per_core.max(1))
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut n: u64 = 0;
                    while !stop.load(Ordering::Relaxed) {
                        n = std::hint::black_box(
                            n.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                    n
                })
            })
            .collect();
        CpuHog { stop, threads }
    }

    /// How many threads it runs.
    pub fn threads(&self) -> usize {
        self.threads.len()
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
