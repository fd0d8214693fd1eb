//! A routed per-principal queue: byte budget, oldest-head eviction and deficit round-robin drain.
//!
//! One [`DrrQueue`] backs one routed subscription. Each principal that has
//! something queued owns a FIFO sub-queue ("bucket"), allocated on its first
//! message and freed the moment it is empty, so an idle principal costs
//! nothing.
//!
//! # Admission ([`DrrQueue::push`])
//! A message costs [`Msg::cost`] bytes (the bus charges payload bytes plus
//! topic bytes). All buckets together stay within [`DrrConfig::budget_bytes`]:
//! 1. A message costing more than the whole budget is refused
//!    ([`PushError::Oversize`]) and nothing is evicted for it.
//! 2. If the principal already holds [`DrrConfig::max_per_principal`]
//!    messages, its own oldest evictable message goes first (defence against
//!    floods of near-zero-byte payloads that the byte budget barely sees).
//! 3. While the message does not fit, the **globally oldest evictable head**
//!    across all principals is evicted. Finding it is `O(log N)` in active
//!    principals: a `BTreeMap` keyed by enqueue sequence number holds exactly
//!    one entry per bucket (its oldest evictable message), where the seed
//!    scanned every bucket.
//!
//! Control messages ([`Msg::control`]: replies, stream terminators,
//! supervision) are never evicted. "Oldest evictable head" therefore means the
//! first non-control message of a bucket; it is the head itself unless
//! control messages sit in front of it, and finding it skips only those
//! (at most `max_per_principal`). If evicting every evictable byte still would
//! not make room, the push is refused up front ([`PushError::BudgetExhausted`])
//! and nothing is evicted — a refused value always comes back to the caller,
//! as tokio's `TrySendError::Full(T)` does.
//!
//! # Drain ([`DrrQueue::pop`], [`DrrQueue::try_drain`])
//! Deficit round-robin over the buckets in arrival order. When a bucket's
//! turn starts it earns `quantum = max(min_quantum, budget_bytes / active)`
//! bytes of deficit; it sends head messages while the head costs no more than
//! its deficit, then the turn passes on. When principals join during a turn,
//! the quantum shrinks and the running turn's allowance with it, so a flooder
//! that started its turn alone cannot keep a whole budget's worth of turn
//! after the others arrive (the queue is drained one message at a time by a
//! pump that may hold a message for a long while). A bucket that could not send anything
//! in a turn is *starved* (counted, reported to the [`DrrObserver`]) and
//! rotated to the back, keeping its deficit, so large messages get through
//! after a bounded number of rounds. An emptied bucket is freed and its
//! deficit forgotten.
//!
//! Nothing here reads a clock: `enqueued_at` is supplied by the caller and is
//! only reported back (queue age), never used for ordering — ordering uses a
//! per-queue sequence number, so equal timestamps are harmless.

mod error;
mod queue;
#[cfg(test)]
mod tests;

pub use error::PushError;
pub use queue::{Drained, DrrQueue};

use std::time::Instant;

/// Default byte budget of one route: 1 MiB.
pub const DEFAULT_BUDGET_BYTES: usize = 1024 * 1024;
/// Default cap on messages queued per principal.
pub const DEFAULT_MAX_PER_PRINCIPAL: usize = 256;
/// Default floor of the DRR quantum, in bytes.
pub const DEFAULT_MIN_QUANTUM_BYTES: usize = 4096;

/// Bounds of a [`DrrQueue`]. `Default` gives the seed's values; the config is
/// also the factory ([`DrrConfig::build`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrrConfig {
    /// Total bytes all buckets may hold (default [`DEFAULT_BUDGET_BYTES`]).
    pub budget_bytes: usize,
    /// Messages one principal may hold (default [`DEFAULT_MAX_PER_PRINCIPAL`]).
    pub max_per_principal: usize,
    /// Lower bound of the per-turn quantum (default [`DEFAULT_MIN_QUANTUM_BYTES`]).
    pub min_quantum_bytes: usize,
}

impl Default for DrrConfig {
    fn default() -> Self {
        Self {
            budget_bytes: DEFAULT_BUDGET_BYTES,
            max_per_principal: DEFAULT_MAX_PER_PRINCIPAL,
            min_quantum_bytes: DEFAULT_MIN_QUANTUM_BYTES,
        }
    }
}

impl DrrConfig {
    /// Builds an empty queue. Zero values are raised to 1 so every bound stays
    /// meaningful.
    pub fn build<K, T>(self) -> DrrQueue<K, T>
    where
        K: std::hash::Hash + Eq + Clone,
    {
        DrrQueue::new(Self {
            budget_bytes: self.budget_bytes.max(1),
            max_per_principal: self.max_per_principal.max(1),
            min_quantum_bytes: self.min_quantum_bytes.max(1),
        })
    }
}

/// One message as the queue sees it: an opaque value plus its accounting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Msg<T> {
    /// What the caller queued.
    pub value: T,
    /// Bytes charged against the budget and the DRR deficit.
    pub cost: usize,
    /// Never evicted (replies, stream terminators, supervision).
    pub control: bool,
    /// Supplied by the caller; reported back, never used for ordering.
    pub enqueued_at: Instant,
}

impl<T> Msg<T> {
    /// An ordinary, evictable message.
    pub fn new(value: T, cost: usize, now: Instant) -> Self {
        Self {
            value,
            cost,
            control: false,
            enqueued_at: now,
        }
    }

    /// A control message or stream terminator: never evicted.
    pub fn control(value: T, cost: usize, now: Instant) -> Self {
        Self {
            control: true,
            ..Self::new(value, cost, now)
        }
    }
}

/// Why a message left the queue without being drained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictReason {
    /// Room was needed within the byte budget.
    Budget,
    /// Its principal reached `max_per_principal`.
    PrincipalCap,
}

/// Hooks for metrics and logs; every method defaults to doing nothing and
/// `()` implements the trait, so callers that do not care pass `&mut ()`.
pub trait DrrObserver<K, T> {
    /// A message of `principal` was evicted to make room.
    fn evicted(&mut self, principal: &K, msg: Msg<T>, reason: EvictReason) {
        let _ = (principal, msg, reason);
    }
    /// `principal`'s bucket ended a turn without sending anything.
    fn starved(&mut self, principal: &K) {
        let _ = principal;
    }
}

impl<K, T> DrrObserver<K, T> for () {}
