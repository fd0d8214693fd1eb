//! The state of the machine a bench runs on.
//!
//! Benches print this beside each round so that rounds are compared within one state.

use std::time::Instant;

/// The round trip of one cache line between two threads, ns (median of 5 runs). The 2-core
/// VM this is measured on switches between two states, ~80 ns and ~400 ns, as its vCPUs are
/// placed on the physical machine; every cross-thread path here (tells local or remote,
/// NATS publish) runs about twice as slow in the second. Printed beside each round, so that
/// rounds are compared within one state.
pub fn core_to_core_ns() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    const TRIPS: u64 = 200_000;
    let mut runs: Vec<u64> = (0..5)
        .map(|_| {
            let flag = std::sync::Arc::new(AtomicU64::new(0));
            let other = flag.clone();
            let pong = std::thread::spawn(move || {
                for i in 0..TRIPS {
                    while other.load(Ordering::Acquire) != 2 * i + 1 {
                        std::hint::spin_loop();
                    }
                    other.store(2 * i + 2, Ordering::Release);
                }
            });
            let t = Instant::now();
            for i in 0..TRIPS {
                while flag.load(Ordering::Acquire) != 2 * i {
                    std::hint::spin_loop();
                }
                flag.store(2 * i + 1, Ordering::Release);
            }
            pong.join().unwrap();
            t.elapsed().as_nanos() as u64 / TRIPS
        })
        .collect();
    runs.sort_unstable();
    runs[2]
}
