//! AIMD concurrency limiter: a lock-free cap on in-flight deliveries that adapts to capacity signals.
//!
//! Additive increase (`on_success`: limit + 1 up to `max_limit`), multiplicative decrease
//! (`on_rejection`: limit / 2 down to `min_limit`), as TCP does with its congestion window
//! (seed 000 §2.3). Acquisition never blocks: a caller that gets `None` must back off (the relay
//! releases its claim, `dispatch` reports the target as `queued-at-limit`).
//!
//! The limit and the in-flight count are two independent atomics. Nothing else is published
//! through them, so no ordering stronger than `Relaxed` is needed for correctness of the data
//! they guard (there is none); the compare-exchange on `in_flight` alone guarantees that
//! `in_flight` never exceeds the limit observed at the moment of acquisition. A concurrent
//! decrease may leave `in_flight` above the new limit for a moment; new acquisitions then fail
//! until enough permits are dropped, which is the intended behaviour.

use std::sync::atomic::{AtomicU32, Ordering};

use serde::Deserialize;

/// How the limit moves with delivery outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConcurrencyStrategy {
    /// Additive increase on success, multiplicative decrease on a capacity rejection.
    #[default]
    Aimd,
    /// The limit stays at `initial_limit` whatever happens.
    Fixed,
}

/// Limiter configuration (the `[outbox.concurrency]` table). Defaults: initial 10, min 1,
/// max 100, AIMD — the seed's `default_outbox_limiter()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConcurrencyConfig {
    /// Limit at start.
    pub initial_limit: u32,
    /// Floor of the multiplicative decrease (at least 1, or nothing would ever be delivered).
    pub min_limit: u32,
    /// Ceiling of the additive increase.
    pub max_limit: u32,
    /// AIMD or fixed.
    pub strategy: ConcurrencyStrategy,
}

impl Default for ConcurrencyConfig {
    fn default() -> Self {
        Self {
            initial_limit: 10,
            min_limit: 1,
            max_limit: 100,
            strategy: ConcurrencyStrategy::Aimd,
        }
    }
}

/// Why a [`ConcurrencyConfig`] was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConcurrencyConfigError {
    /// `min_limit` was 0.
    #[error("min_limit must be at least 1")]
    ZeroMin,
    /// The three limits were not ordered `min <= initial <= max`.
    #[error(
        "limits must satisfy min_limit ({min}) <= initial_limit ({initial}) <= max_limit ({max})"
    )]
    Unordered {
        /// `min_limit`
        min: u32,
        /// `initial_limit`
        initial: u32,
        /// `max_limit`
        max: u32,
    },
}

impl ConcurrencyConfig {
    /// Check `1 <= min <= initial <= max`.
    pub fn validate(&self) -> Result<(), ConcurrencyConfigError> {
        if self.min_limit == 0 {
            return Err(ConcurrencyConfigError::ZeroMin);
        }
        if !(self.min_limit <= self.initial_limit && self.initial_limit <= self.max_limit) {
            return Err(ConcurrencyConfigError::Unordered {
                min: self.min_limit,
                initial: self.initial_limit,
                max: self.max_limit,
            });
        }
        Ok(())
    }

    /// Build a limiter from this config (the config is the factory, as in quinn's congestion
    /// controllers).
    pub fn build(&self) -> Result<ConcurrencyLimiter, ConcurrencyConfigError> {
        ConcurrencyLimiter::new(*self)
    }
}

/// Lock-free AIMD limiter. Share it by reference or in an `Arc`.
#[derive(Debug)]
pub struct ConcurrencyLimiter {
    current_limit: AtomicU32,
    in_flight: AtomicU32,
    min_limit: u32,
    max_limit: u32,
    strategy: ConcurrencyStrategy,
}

/// One in-flight slot. Dropping it without a verdict releases the slot and leaves the limit
/// unchanged (the right thing for a transient failure or an abandoned attempt).
#[derive(Debug)]
#[must_use = "dropping a permit immediately releases the slot"]
pub struct Permit<'a> {
    limiter: &'a ConcurrencyLimiter,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        // Each permit was counted exactly once in try_acquire; this cannot underflow.
        self.limiter.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl ConcurrencyLimiter {
    /// A limiter starting at `config.initial_limit`.
    pub fn new(config: ConcurrencyConfig) -> Result<Self, ConcurrencyConfigError> {
        config.validate()?;
        Ok(Self {
            current_limit: AtomicU32::new(config.initial_limit),
            in_flight: AtomicU32::new(0),
            min_limit: config.min_limit,
            max_limit: config.max_limit,
            strategy: config.strategy,
        })
    }

    /// Take a slot if fewer than `current_limit` are in flight. Never blocks.
    pub fn try_acquire(&self) -> Option<Permit<'_>> {
        let limit = self.current_limit.load(Ordering::Relaxed);
        self.in_flight
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Permit { limiter: self })
    }

    /// The delivery succeeded: additive increase (AIMD), then the slot is released.
    pub fn on_success(&self, permit: Permit<'_>) {
        debug_assert!(
            std::ptr::eq(permit.limiter, self),
            "permit of another limiter"
        );
        if self.strategy == ConcurrencyStrategy::Aimd {
            let max = self.max_limit;
            let _ = self
                .current_limit
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| {
                    (l < max).then_some(l + 1)
                });
        }
        drop(permit);
    }

    /// The receiver signalled it is at capacity: multiplicative decrease (AIMD), then the slot
    /// is released.
    pub fn on_rejection(&self, permit: Permit<'_>) {
        debug_assert!(
            std::ptr::eq(permit.limiter, self),
            "permit of another limiter"
        );
        if self.strategy == ConcurrencyStrategy::Aimd {
            let min = self.min_limit;
            let _ = self
                .current_limit
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| {
                    let new = (l / 2).max(min);
                    (new != l).then_some(new)
                });
        }
        drop(permit);
    }

    /// The current limit.
    pub fn current_limit(&self) -> u32 {
        self.current_limit.load(Ordering::Relaxed)
    }

    /// Permits currently held.
    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// The configured floor.
    pub fn min_limit(&self) -> u32 {
        self.min_limit
    }

    /// The configured ceiling.
    pub fn max_limit(&self) -> u32 {
        self.max_limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn limiter(initial: u32, min: u32, max: u32) -> ConcurrencyLimiter {
        ConcurrencyConfig {
            initial_limit: initial,
            min_limit: min,
            max_limit: max,
            strategy: ConcurrencyStrategy::Aimd,
        }
        .build()
        .unwrap()
    }

    #[test]
    fn defaults_match_the_seed() {
        let c = ConcurrencyConfig::default();
        assert_eq!((c.initial_limit, c.min_limit, c.max_limit), (10, 1, 100));
        assert_eq!(c.strategy, ConcurrencyStrategy::Aimd);
    }

    #[test]
    fn acquire_stops_at_the_limit_and_drop_releases() {
        let l = limiter(2, 1, 10);
        let a = l.try_acquire().unwrap();
        let _b = l.try_acquire().unwrap();
        assert!(l.try_acquire().is_none());
        drop(a);
        assert_eq!(l.in_flight(), 1);
        assert_eq!(
            l.current_limit(),
            2,
            "drop without verdict leaves the limit alone"
        );
        assert!(l.try_acquire().is_some());
    }

    #[test]
    fn success_adds_one_up_to_max_and_rejection_halves_down_to_min() {
        let l = limiter(10, 3, 12);
        for _ in 0..5 {
            l.on_success(l.try_acquire().unwrap());
        }
        assert_eq!(l.current_limit(), 12);
        l.on_rejection(l.try_acquire().unwrap());
        assert_eq!(l.current_limit(), 6);
        l.on_rejection(l.try_acquire().unwrap());
        assert_eq!(l.current_limit(), 3);
        l.on_rejection(l.try_acquire().unwrap());
        assert_eq!(l.current_limit(), 3);
        assert_eq!(l.in_flight(), 0);
    }

    #[test]
    fn fixed_strategy_never_moves() {
        let l = ConcurrencyConfig {
            strategy: ConcurrencyStrategy::Fixed,
            ..Default::default()
        }
        .build()
        .unwrap();
        l.on_success(l.try_acquire().unwrap());
        l.on_rejection(l.try_acquire().unwrap());
        assert_eq!(l.current_limit(), 10);
    }

    #[test]
    fn invalid_configs_are_refused() {
        assert_eq!(limiter_err(5, 0, 10), ConcurrencyConfigError::ZeroMin);
        assert!(matches!(
            limiter_err(11, 1, 10),
            ConcurrencyConfigError::Unordered { .. }
        ));
    }

    fn limiter_err(initial: u32, min: u32, max: u32) -> ConcurrencyConfigError {
        ConcurrencyConfig {
            initial_limit: initial,
            min_limit: min,
            max_limit: max,
            strategy: ConcurrencyStrategy::Aimd,
        }
        .build()
        .unwrap_err()
    }

    /// Threads hammer one limiter with random verdicts; the in-flight count seen by each holder
    /// never exceeds the max, the limit stays within bounds, and everything is released.
    #[test]
    fn concurrent_stress_keeps_invariants() {
        use std::sync::Arc;
        use std::sync::atomic::AtomicU32;
        let l = Arc::new(limiter(10, 2, 40));
        let holders = Arc::new(AtomicU32::new(0));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let l = l.clone();
                let holders = holders.clone();
                std::thread::spawn(move || {
                    let mut x: u32 = t * 7919 + 1;
                    for _ in 0..20_000 {
                        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                        if let Some(p) = l.try_acquire() {
                            let h = holders.fetch_add(1, Ordering::SeqCst) + 1;
                            assert!(h <= 40, "{h} holders above max_limit");
                            let lim = l.current_limit();
                            assert!((2..=40).contains(&lim));
                            holders.fetch_sub(1, Ordering::SeqCst);
                            match x % 3 {
                                0 => l.on_success(p),
                                1 => l.on_rejection(p),
                                _ => drop(p),
                            }
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(l.in_flight(), 0);
        assert!((2..=40).contains(&l.current_limit()));
    }

    proptest! {
        /// Any sequence of verdicts keeps the limit within [min, max] and matches a simple model.
        #[test]
        fn limit_follows_the_aimd_model(
            min in 1u32..5, extra in 0u32..50, verdicts in proptest::collection::vec(0u8..3, 0..200)
        ) {
            let max = min + extra;
            let l = limiter(min, min, max);
            let mut model = min;
            for v in verdicts {
                let p = l.try_acquire().expect("one at a time always fits");
                match v {
                    0 => { l.on_success(p); model = (model + 1).min(max); }
                    1 => { l.on_rejection(p); model = (model / 2).max(min); }
                    _ => drop(p),
                }
                prop_assert_eq!(l.current_limit(), model);
            }
            prop_assert_eq!(l.in_flight(), 0);
        }
    }
}
