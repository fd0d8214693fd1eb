//! What a subscription counts, and the snapshot `Host::bus_stats` reports.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use sluice_bus::RouteStatsHandle;

use crate::config::Subscription;
use crate::id::ActorId;

/// A snapshot of one subscription (`Host::bus_stats`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SubscriptionStats {
    /// The receiving actor, `Type/key`.
    pub actor: String,
    /// The pattern.
    pub topic: String,
    /// `routed` or `broadcast`.
    pub mode: &'static str,
    /// Events handed to the subscriber's mailbox.
    pub delivered: u64,
    /// Events dropped, each counted: by a `drop_newest` mailbox, or (dispatch) by a full
    /// dispatcher queue or a principal that cannot be an actor key.
    pub dropped: u64,
    /// Refused deliveries retried (the event was held meanwhile).
    pub retried: u64,
    /// Broadcast: ring events skipped because this subscriber fell behind (counted before
    /// its topic filter). Routed: always 0.
    pub lagged: u64,
    /// Routed: events waiting in the subscription's queues.
    pub queued: usize,
    /// Routed: bytes of the budget in use.
    pub bytes_in_use: usize,
    /// Routed: principals with queued events.
    pub active_principals: usize,
    /// Routed: events evicted to stay within the budget or the per-principal cap.
    pub evicted: u64,
    /// Routed: events refused outright (larger than the whole budget).
    pub refused: u64,
    /// Routed: age of the oldest queued event, milliseconds.
    pub oldest_age_ms: Option<u64>,
    /// Dispatch: live (actor type, principal) queues, idle queues freed, principals folded
    /// into the `system` queue by the cap, events waiting and the oldest one's age. (Events
    /// refused by a full queue are `dropped`.)
    pub dispatch: Option<DispatchStats>,
}

/// A dispatch subscription's queues (`SubscriptionStats::dispatch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct DispatchStats {
    /// Live (actor type, principal) queues, each with one consumer.
    pub queues: usize,
    /// Queues freed by a consumer idle for `dispatch_idle_ms`.
    pub idle_evictions: u64,
    /// Principals that shared the `system` queue because of the per-type cap.
    pub overflowed: u64,
    /// Events waiting in the queues (not yet handed to their actor).
    pub queued: usize,
    /// Age of the oldest waiting event, milliseconds.
    pub oldest_age_ms: Option<u64>,
}

pub(crate) struct Shared {
    pub sub: Subscription,
    /// The receiver: `Type/key`, or `Type/{principal}` for a dispatch subscription.
    pub target: ActorId,
    /// A dispatch subscription's dispatcher stats (set once its dispatcher exists).
    pub dispatch: std::sync::OnceLock<Box<dyn Fn() -> DispatchStats + Send + Sync>>,
    pub delivered: AtomicU64,
    pub dropped: AtomicU64,
    pub retried: AtomicU64,
    pub lagged: AtomicU64,
    pub route: Option<RouteStatsHandle>,
    pub m_delivered: metrics::Counter,
    pub m_dropped: metrics::Counter,
    pub m_retried: metrics::Counter,
}

impl Shared {
    /// An event this subscription dropped (and will never deliver): counted, never silent.
    pub fn count_dropped(&self) {
        self.dropped.fetch_add(1, Relaxed);
        self.m_dropped.increment(1);
    }

    pub fn stats(&self) -> SubscriptionStats {
        let r = self.route.as_ref().map(RouteStatsHandle::stats);
        let now = Instant::now();
        SubscriptionStats {
            actor: self.target.to_string(),
            topic: self.sub.topic.clone(),
            mode: self.sub.mode.as_str(),
            delivered: self.delivered.load(Relaxed),
            dropped: self.dropped.load(Relaxed),
            retried: self.retried.load(Relaxed),
            lagged: self.lagged.load(Relaxed),
            queued: r.as_ref().map_or(0, |r| r.len),
            bytes_in_use: r.as_ref().map_or(0, |r| r.bytes_in_use),
            active_principals: r.as_ref().map_or(0, |r| r.active_principals),
            evicted: r.as_ref().map_or(0, |r| r.evicted_total),
            refused: r.as_ref().map_or(0, |r| r.refused_total),
            oldest_age_ms: r
                .as_ref()
                .and_then(|r| r.oldest_enqueued_at)
                .map(|t| now.saturating_duration_since(t).as_millis() as u64),
            dispatch: self.dispatch.get().map(|f| f()),
        }
    }
}
