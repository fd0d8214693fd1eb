//! Retry policy (exponential backoff with full jitter) and a retry budget (token bucket).
//!
//! Both are pure: randomness comes in as an `Rng`, time as `now_ms`.

use rand::Rng;
use serde::Deserialize;

/// How often and how slowly to retry a failed delivery (the `[outbox.retry_policy]` table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryPolicy {
    /// Attempts before a message is dead-lettered (the first delivery counts). Default 5.
    pub max_attempts: u32,
    /// Base of the exponential backoff, in milliseconds. Default 100.
    pub base_ms: u64,
    /// Ceiling of the backoff, in milliseconds. Default 30 000.
    pub cap_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_ms: 100,
            cap_ms: 30_000,
        }
    }
}

impl RetryPolicy {
    /// Whether a message that just failed its `attempt`-th delivery (1-based) may be retried.
    pub fn should_retry(&self, attempt: u32) -> bool {
        attempt < self.max_attempts
    }

    /// The backoff ceiling for `attempt`: `min(cap, base · 2^attempt)`, saturating.
    pub fn ceiling_ms(&self, attempt: u32) -> u64 {
        let factor = 1u64.checked_shl(attempt).unwrap_or(u64::MAX);
        self.base_ms.saturating_mul(factor).min(self.cap_ms)
    }

    /// Full jitter: uniform in `0..=min(cap, base · 2^attempt)` (AWS architecture blog,
    /// "Exponential Backoff And Jitter"). Spreads retries of a herd over the whole window.
    pub fn backoff_ms<R: Rng + ?Sized>(&self, attempt: u32, rng: &mut R) -> u64 {
        rng.random_range(0..=self.ceiling_ms(attempt))
    }

    /// Backoff after a capacity rejection: full jitter, but never sooner than the receiver's
    /// `retry_after_ms` hint.
    pub fn backoff_after_capacity_ms<R: Rng + ?Sized>(
        &self,
        attempt: u32,
        retry_after_ms: u64,
        rng: &mut R,
    ) -> u64 {
        self.backoff_ms(attempt, rng).max(retry_after_ms)
    }
}

/// Retry budget configuration (the `[outbox.retry_budget]` table).
///
/// Retries may use at most `ratio_percent` % of first attempts, plus a floor of
/// `min_retries_per_sec`, with at most `burst` retries banked. Defaults: 20 %, 10/s, burst 100
/// (Finagle's and gRPC's retry throttling use the same shape).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryBudgetConfig {
    /// When false, retries are never throttled.
    pub enabled: bool,
    /// Each first attempt earns this percentage of one retry.
    pub ratio_percent: u32,
    /// Retries allowed per second even with no first attempts (so a backlog still drains).
    pub min_retries_per_sec: u32,
    /// Most retries that can be banked.
    pub burst: u32,
}

impl Default for RetryBudgetConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            ratio_percent: 20,
            min_retries_per_sec: 10,
            burst: 100,
        }
    }
}

const MILLI: u64 = 1000;

/// Token bucket that caps retries at a fraction of first attempts, so a backlog of retries
/// cannot keep a receiver in metastable overload once the trigger has gone (seed 000 §5).
///
/// Not thread-safe by design: the relay keeps one per partition worker, and one task owns it.
#[derive(Debug, Clone)]
pub struct RetryBudget {
    config: RetryBudgetConfig,
    /// Thousandths of a retry.
    tokens: u64,
    last_refill_ms: Option<u64>,
}

impl RetryBudget {
    /// A budget that starts full (`burst` retries banked).
    pub fn new(config: RetryBudgetConfig) -> Self {
        Self {
            config,
            tokens: u64::from(config.burst) * MILLI,
            last_refill_ms: None,
        }
    }

    fn cap(&self) -> u64 {
        u64::from(self.config.burst) * MILLI
    }

    fn refill(&mut self, now_ms: u64) {
        if let Some(last) = self.last_refill_ms {
            let elapsed = now_ms.saturating_sub(last);
            // min_retries_per_sec retries per 1000 ms = min_retries_per_sec milli-retries per ms.
            let earned = elapsed.saturating_mul(u64::from(self.config.min_retries_per_sec));
            self.tokens = self.tokens.saturating_add(earned).min(self.cap());
        }
        // Time never goes backwards for the bucket.
        self.last_refill_ms = Some(self.last_refill_ms.map_or(now_ms, |l| l.max(now_ms)));
    }

    /// Record a first attempt: it earns `ratio_percent` % of a retry.
    pub fn on_first_attempt(&mut self, now_ms: u64) {
        self.refill(now_ms);
        let earned = u64::from(self.config.ratio_percent) * MILLI / 100;
        self.tokens = self.tokens.saturating_add(earned).min(self.cap());
    }

    /// Ask to make one retry now. `false` means the budget is spent: defer the retry.
    pub fn try_retry(&mut self, now_ms: u64) -> bool {
        if !self.config.enabled {
            return true;
        }
        self.refill(now_ms);
        if self.tokens >= MILLI {
            self.tokens -= MILLI;
            true
        } else {
            false
        }
    }

    /// Whole retries currently available.
    pub fn available(&self) -> u64 {
        if self.config.enabled {
            self.tokens / MILLI
        } else {
            u64::MAX
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn should_retry_until_max_attempts() {
        let p = RetryPolicy::default();
        assert!(p.should_retry(1));
        assert!(p.should_retry(4));
        assert!(!p.should_retry(5));
    }

    #[test]
    fn ceiling_doubles_then_caps_and_saturates() {
        let p = RetryPolicy {
            max_attempts: 5,
            base_ms: 100,
            cap_ms: 1000,
        };
        assert_eq!(p.ceiling_ms(0), 100);
        assert_eq!(p.ceiling_ms(1), 200);
        assert_eq!(p.ceiling_ms(3), 800);
        assert_eq!(p.ceiling_ms(4), 1000);
        assert_eq!(p.ceiling_ms(200), 1000);
    }

    proptest! {
        #[test]
        fn full_jitter_stays_within_zero_and_the_ceiling(
            base in 0u64..10_000, cap in 0u64..1_000_000, attempt in 0u32..100, seed: u64
        ) {
            let p = RetryPolicy { max_attempts: 5, base_ms: base, cap_ms: cap };
            let mut rng = SmallRng::seed_from_u64(seed);
            let d = p.backoff_ms(attempt, &mut rng);
            prop_assert!(d <= cap);
            prop_assert!(d <= base.saturating_mul(1u64.checked_shl(attempt).unwrap_or(u64::MAX)));
        }

        #[test]
        fn capacity_backoff_honours_retry_after(
            attempt in 0u32..20, retry_after in 0u64..100_000, seed: u64
        ) {
            let p = RetryPolicy::default();
            let mut rng = SmallRng::seed_from_u64(seed);
            let d = p.backoff_after_capacity_ms(attempt, retry_after, &mut rng);
            prop_assert!(d >= retry_after);
            prop_assert!(d <= retry_after.max(p.cap_ms));
        }
    }

    #[test]
    fn jitter_covers_the_window() {
        let p = RetryPolicy {
            max_attempts: 5,
            base_ms: 10,
            cap_ms: 1000,
        };
        let mut rng = SmallRng::seed_from_u64(7);
        let draws: Vec<u64> = (0..2000).map(|_| p.backoff_ms(3, &mut rng)).collect();
        assert!(draws.iter().any(|&d| d < 10));
        assert!(draws.iter().any(|&d| d > 70));
    }

    #[test]
    fn budget_caps_retries_at_a_fraction_of_first_attempts() {
        let mut b = RetryBudget::new(RetryBudgetConfig {
            enabled: true,
            ratio_percent: 20,
            min_retries_per_sec: 0,
            burst: 10,
        });
        // Drain the initial bank.
        let mut granted = 0;
        while b.try_retry(0) {
            granted += 1;
        }
        assert_eq!(granted, 10);
        // 100 first attempts earn 20 retries, but only 10 can be banked.
        for _ in 0..100 {
            b.on_first_attempt(0);
        }
        assert_eq!(b.available(), 10);
        for _ in 0..10 {
            assert!(b.try_retry(0));
        }
        // 25 more first attempts earn 5.
        for _ in 0..25 {
            b.on_first_attempt(0);
        }
        assert_eq!((0..20).filter(|_| b.try_retry(0)).count(), 5);
    }

    #[test]
    fn budget_refills_at_the_floor_rate_with_time() {
        let mut b = RetryBudget::new(RetryBudgetConfig {
            enabled: true,
            ratio_percent: 0,
            min_retries_per_sec: 10,
            burst: 5,
        });
        while b.try_retry(1_000) {}
        assert!(!b.try_retry(1_050), "50 ms earns half a retry");
        assert!(b.try_retry(1_100), "100 ms earns one");
        assert!(!b.try_retry(1_100));
        // A long idle period refills only up to the burst.
        assert_eq!((0..20).filter(|_| b.try_retry(100_000)).count(), 5);
        // A clock that goes backwards earns nothing.
        assert!(!b.try_retry(50_000));
    }

    #[test]
    fn disabled_budget_never_refuses() {
        let mut b = RetryBudget::new(RetryBudgetConfig {
            enabled: false,
            ..Default::default()
        });
        assert!((0..10_000).all(|_| b.try_retry(0)));
    }
}
