//! A coarse process clock for paths that must not pay for reading the real one: the epoch
//! ticker advances it every tick, so it lags real time by at most one tick.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The process-wide origin of clock stamps.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// `t` as nanoseconds since the origin (0 for instants before it).
pub(crate) fn since_origin(t: Instant) -> u64 {
    t.saturating_duration_since(origin()).as_nanos() as u64
}

/// [`since_origin`] of the last tick.
static COARSE_NOW: AtomicU64 = AtomicU64::new(0);

/// Advances the coarse clock; the epoch ticker calls it every tick. Relaxed: a reader only
/// needs some recent value, and `fetch_max` keeps it monotonic across hosts' tickers.
pub(crate) fn tick() {
    COARSE_NOW.fetch_max(since_origin(Instant::now()), Ordering::Relaxed);
}

/// Nanoseconds since the origin as of the last tick: one atomic load, no syscall.
pub(crate) fn coarse_now() -> u64 {
    COARSE_NOW.load(Ordering::Relaxed)
}
