//! Where the outbox's `now` comes from: the relay, `dispatch`, the DLQ and stats never read a
//! clock themselves, they ask the [`Clock`] the [`crate::Outbox`] was built with.
//!
//! [`SystemClock`] (the default) is the wall clock. [`TokioClock`] follows tokio's clock, so a
//! test on paused time (`#[tokio::test(start_paused = true)]`) sees backoffs, leases, delays and
//! TTLs elapse as fast as the runtime can auto-advance, instead of sleeping for them.

use std::time::{SystemTime, UNIX_EPOCH};

/// The time base of every stored timestamp: milliseconds since the Unix epoch.
///
/// Every host that shares one store must use clocks that agree (leases and backoffs written by
/// one are read by the others), so outside tests this is the wall clock.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
}

/// The wall clock ([`SystemTime`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }
}

/// tokio's clock, anchored to the wall clock when created: `now_ms` is the wall time at
/// creation plus what [`tokio::time::Instant`] says has elapsed since. On paused time that is
/// virtual time, so stored timestamps and the relay's timers move together.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    epoch_ms: i64,
    start: tokio::time::Instant,
}

impl TokioClock {
    /// Anchor tokio's clock to the wall clock now. Call it inside the runtime whose clock it
    /// should follow.
    pub fn new() -> Self {
        Self {
            epoch_ms: SystemClock.now_ms(),
            start: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now_ms(&self) -> i64 {
        self.epoch_ms + self.start.elapsed().as_millis() as i64
    }
}

/// Milliseconds since the Unix epoch on the wall clock ([`SystemClock`]).
pub fn now_ms() -> i64 {
    SystemClock.now_ms()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn the_tokio_clock_follows_paused_time() {
        let clock = TokioClock::new();
        let t0 = clock.now_ms();
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert_eq!(clock.now_ms() - t0, 3_600_000);
    }
}
