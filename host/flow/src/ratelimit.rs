//! IPC rate limiting per (actor type, principal): a byte budget per 1-second window.
//!
//! The algorithm is a fixed window aligned to whole seconds of the caller's
//! millisecond clock: a bucket may send up to its principal's quota of bytes
//! per window, and the count resets when `now_ms / 1000` moves on. Before any
//! window arithmetic, a hard ceiling of [`MAX_IPC_PAYLOAD_BYTES`] per payload
//! applies; it is a constant, not configuration, so no profile can raise it.
//!
//! The whole state of a bucket is one [`Window`], packed into a `u64`
//! (window number in the high 32 bits, bytes used in the low 32), so a
//! concurrent limiter can keep each bucket in an `AtomicU64` and update it
//! with a single compare-and-swap ([`Window::try_consume`] is the pure step);
//! `sluice-bus`'s `IpcRateLimiter` is that concurrent limiter, sharded by key.
//!
//! Keys are `(actor type, principal)`: Alice's flood cannot consume Bob's
//! budget, and the same principal on two actor types has two budgets.

use std::collections::HashMap;

/// Hard per-payload ceiling: 5 MiB. Not configurable by design.
pub const MAX_IPC_PAYLOAD_BYTES: usize = 5 * 1024 * 1024;
/// Length of one accounting window.
pub const WINDOW_MS: u64 = 1000;
/// Default per-principal quota: 10 MiB per second.
pub const DEFAULT_QUOTA_BYTES_PER_SEC: u64 = 10 * 1024 * 1024;
/// Largest quota a bucket can count to (the packed counter is 32 bits).
pub const MAX_QUOTA_BYTES_PER_SEC: u64 = u32::MAX as u64;
/// Pruning is considered once more buckets than this exist.
pub const DEFAULT_PRUNE_THRESHOLD: usize = 1000;
/// Minimum time between two prunes.
pub const DEFAULT_PRUNE_INTERVAL_MS: u64 = 60_000;

/// A refused check. Quota refusals are transient and say when to retry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RateLimitError {
    /// The bucket's bytes for this window are used up.
    #[error("RESOURCE_EXHAUSTED: ipc rate limit exceeded (retry_after_ms={retry_after_ms})")]
    QuotaExceeded {
        /// Milliseconds until the next window opens.
        retry_after_ms: u64,
        /// The principal's quota in bytes per second.
        quota_bytes_per_sec: u64,
    },
    /// The payload alone is larger than the principal's whole per-second
    /// quota; waiting cannot help.
    #[error(
        "INVALID_ARGUMENT: payload of {size} bytes exceeds the quota of {quota_bytes_per_sec} bytes per second"
    )]
    ExceedsQuota {
        /// Payload size in bytes.
        size: usize,
        /// The principal's quota in bytes per second.
        quota_bytes_per_sec: u64,
    },
    /// The payload is above [`MAX_IPC_PAYLOAD_BYTES`].
    #[error("INVALID_ARGUMENT: payload of {size} bytes exceeds the {max} byte ceiling", max = MAX_IPC_PAYLOAD_BYTES)]
    PayloadTooLarge {
        /// Payload size in bytes.
        size: usize,
    },
}

impl RateLimitError {
    /// The canonical error code carried across the guest boundary.
    pub fn code(&self) -> &'static str {
        match self {
            Self::QuotaExceeded { .. } => "RESOURCE_EXHAUSTED",
            Self::ExceedsQuota { .. } | Self::PayloadTooLarge { .. } => "INVALID_ARGUMENT",
        }
    }

    /// When to retry, for transient refusals.
    pub fn retry_after_ms(&self) -> Option<u64> {
        match self {
            Self::QuotaExceeded { retry_after_ms, .. } => Some(*retry_after_ms),
            _ => None,
        }
    }
}

/// Refuses payloads above the hard ceiling.
pub fn check_payload_size(size: usize) -> Result<(), RateLimitError> {
    if size > MAX_IPC_PAYLOAD_BYTES {
        Err(RateLimitError::PayloadTooLarge { size })
    } else {
        Ok(())
    }
}

/// Quotas: a default plus per-principal overrides. `Default` gives
/// [`DEFAULT_QUOTA_BYTES_PER_SEC`] for everyone and the default pruning bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitConfig {
    /// Bytes per second for principals without an override.
    pub default_quota_bytes_per_sec: u64,
    /// Per-principal quotas, by principal id.
    pub overrides: HashMap<String, u64>,
    /// Prune only when more buckets than this exist (default 1000).
    pub prune_threshold: usize,
    /// And at most once per this many milliseconds (default 60 s).
    pub prune_interval_ms: u64,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self {
            default_quota_bytes_per_sec: DEFAULT_QUOTA_BYTES_PER_SEC,
            overrides: HashMap::new(),
            prune_threshold: DEFAULT_PRUNE_THRESHOLD,
            prune_interval_ms: DEFAULT_PRUNE_INTERVAL_MS,
        }
    }
}

impl RateLimitConfig {
    /// Sets the default quota (clamped to [`MAX_QUOTA_BYTES_PER_SEC`]).
    pub fn default_quota(mut self, bytes_per_sec: u64) -> Self {
        self.default_quota_bytes_per_sec = bytes_per_sec.min(MAX_QUOTA_BYTES_PER_SEC);
        self
    }

    /// Gives `principal` its own quota (clamped to [`MAX_QUOTA_BYTES_PER_SEC`]).
    pub fn quota_override(mut self, principal: impl Into<String>, bytes_per_sec: u64) -> Self {
        self.overrides
            .insert(principal.into(), bytes_per_sec.min(MAX_QUOTA_BYTES_PER_SEC));
        self
    }

    /// The quota that applies to `principal`.
    pub fn quota_for(&self, principal: &str) -> u64 {
        self.overrides
            .get(principal)
            .copied()
            .unwrap_or(self.default_quota_bytes_per_sec)
            .min(MAX_QUOTA_BYTES_PER_SEC)
    }
}

/// One bucket's state: the window number and the bytes used in it, packed
/// into a `u64` so a concurrent limiter can CAS it as a whole.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window(u64);

impl Window {
    /// Reconstructs a window from [`to_bits`](Self::to_bits).
    pub fn from_bits(bits: u64) -> Self {
        Self(bits)
    }

    /// The packed representation.
    pub fn to_bits(self) -> u64 {
        self.0
    }

    fn number(now_ms: u64) -> u32 {
        // Wraps after ~136 years of the caller's clock; only differences are used.
        (now_ms / WINDOW_MS) as u32
    }

    /// The window a charge at `now_ms` lands in, and what is already used in
    /// it. The window never moves backwards: a caller whose `now` is behind
    /// the bucket's window (it read the clock, then lost the CPU while another
    /// caller moved the bucket on) is charged in the bucket's newer window.
    /// Otherwise two callers straddling a boundary could flip the bucket
    /// between two windows and reset its count each time.
    fn effective(self, now_ms: u64) -> (u32, u64) {
        let (state, now) = ((self.0 >> 32) as u32, Self::number(now_ms));
        let used = self.0 & 0xffff_ffff;
        match now.wrapping_sub(state) as i32 {
            0 => (now, used),
            behind if behind < 0 => (state, used),
            _ => (now, 0),
        }
    }

    /// Bytes counted in the window a charge at `now_ms` would land in.
    pub fn used(self, now_ms: u64) -> u64 {
        self.effective(now_ms).1
    }

    /// True when the bucket's window is over at `now_ms` (safe to forget).
    pub fn is_stale(self, now_ms: u64) -> bool {
        (Self::number(now_ms).wrapping_sub((self.0 >> 32) as u32) as i32) > 0
    }

    /// The pure step: charge `size` bytes against `quota` at `now_ms`.
    /// Returns the new state, or the refusal (state unchanged).
    pub fn try_consume(self, now_ms: u64, size: usize, quota: u64) -> Result<Self, RateLimitError> {
        let size64 = size as u64;
        if size64 > quota {
            return Err(RateLimitError::ExceedsQuota {
                size,
                quota_bytes_per_sec: quota,
            });
        }
        let (window, used) = self.effective(now_ms);
        if used + size64 > quota {
            // The window ends at (window + 1) seconds; `window` is `now_ms /
            // 1000` truncated to 32 bits, exact for the next ~136 years.
            let ends_at = (u64::from(window) + 1) * WINDOW_MS;
            return Err(RateLimitError::QuotaExceeded {
                retry_after_ms: ends_at.saturating_sub(now_ms).max(1),
                quota_bytes_per_sec: quota,
            });
        }
        // used + size <= quota <= u32::MAX, so the low half cannot overflow.
        Ok(Self((u64::from(window) << 32) | (used + size64)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Charges `sizes` to one bucket at `now_ms`, as a limiter would.
    fn charge(
        w: Window,
        now_ms: u64,
        sizes: &[usize],
        quota: u64,
    ) -> Result<Window, RateLimitError> {
        sizes
            .iter()
            .try_fold(w, |w, size| w.try_consume(now_ms, *size, quota))
    }

    #[test]
    fn a_spent_window_refuses_until_the_next_second_with_the_canonical_error() {
        let w = charge(Window::default(), 5_000, &[100; 10], 1000).unwrap();
        let err = w.try_consume(5_250, 1, 1000).unwrap_err();
        assert_eq!(
            err,
            RateLimitError::QuotaExceeded {
                retry_after_ms: 750,
                quota_bytes_per_sec: 1000
            }
        );
        assert_eq!(err.code(), "RESOURCE_EXHAUSTED");
        assert_eq!(
            err.to_string(),
            "RESOURCE_EXHAUSTED: ipc rate limit exceeded (retry_after_ms=750)"
        );
    }

    #[test]
    fn the_window_resets_each_second() {
        let w = Window::default().try_consume(1999, 1000, 1000).unwrap();
        assert_eq!(
            w.try_consume(1999, 1, 1000).unwrap_err().retry_after_ms(),
            Some(1)
        );
        w.try_consume(2000, 1000, 1000).unwrap();
    }

    #[test]
    fn a_caller_with_a_stale_clock_is_charged_in_the_newer_window() {
        let quota = 1000;
        let w = Window::default().try_consume(2_500, 1000, quota).unwrap();
        // A caller that read the clock at 1_999 cannot reopen window 1.
        let err = w.try_consume(1_999, 1, quota).unwrap_err();
        assert_eq!(err.retry_after_ms(), Some(1_001));
        assert!(
            !w.is_stale(1_999),
            "a bucket ahead of the pruner's clock is kept"
        );
        assert!(w.is_stale(3_000));
        let w2 = Window::default().try_consume(2_500, 10, quota).unwrap();
        let w3 = w2.try_consume(1_999, 10, quota).unwrap();
        assert_eq!(w3.used(2_999), 20);
    }

    #[test]
    fn overrides_apply_per_principal() {
        let cfg = RateLimitConfig::default()
            .default_quota(100)
            .quota_override("batch", 10_000);
        Window::default()
            .try_consume(0, 5000, cfg.quota_for("batch"))
            .unwrap();
        assert!(matches!(
            Window::default().try_consume(0, 101, cfg.quota_for("other")),
            Err(RateLimitError::ExceedsQuota { size: 101, .. })
        ));
    }

    #[test]
    fn five_mib_ceiling_cannot_be_raised_by_any_quota() {
        let cfg = RateLimitConfig::default()
            .default_quota(u64::MAX)
            .quota_override("root", u64::MAX);
        check_payload_size(MAX_IPC_PAYLOAD_BYTES).unwrap();
        let err = check_payload_size(MAX_IPC_PAYLOAD_BYTES + 1).unwrap_err();
        assert_eq!(
            err,
            RateLimitError::PayloadTooLarge {
                size: MAX_IPC_PAYLOAD_BYTES + 1
            }
        );
        assert_eq!(err.code(), "INVALID_ARGUMENT");
        assert_eq!(cfg.quota_for("root"), MAX_QUOTA_BYTES_PER_SEC);
    }

    #[test]
    fn packed_window_round_trips_and_counts_to_u32_max() {
        let w = Window::default()
            .try_consume(3_500, 7, MAX_QUOTA_BYTES_PER_SEC)
            .unwrap();
        assert_eq!(Window::from_bits(w.to_bits()), w);
        assert_eq!(w.used(3_999), 7);
        assert_eq!(w.used(4_000), 0);
        assert!(w.is_stale(4_000));
        let full = Window::default()
            .try_consume(0, u32::MAX as usize, MAX_QUOTA_BYTES_PER_SEC)
            .unwrap();
        assert_eq!(full.used(0), u64::from(u32::MAX));
        assert!(full.try_consume(0, 1, MAX_QUOTA_BYTES_PER_SEC).is_err());
    }
}
