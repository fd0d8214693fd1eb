//! Routed subscriptions: one [`Route`] per subscription, a DRR queue per route.
//!
//! The queue itself is [`sluice_flow::drr::DrrQueue`]; this module adds the
//! lock, the wake-up, the metrics and the logs around it.

mod receiver;

pub use receiver::{RouteStats, RouteStatsHandle, RoutedReceiver};

use crate::metrics::{
    ACTIVE_PRINCIPALS, BUDGET_IN_USE_BYTES, BYTE_EVICTIONS_TOTAL, QUANTUM_STARVED_TOTAL,
    ROUTE_REFUSED_TOTAL,
};
use crate::{Event, PrincipalClass};
use parking_lot::Mutex;
use sluice_flow::drr::{DrrConfig, DrrObserver, DrrQueue, EvictReason, Msg, PushError};
use sluice_flow::topic::TopicPattern;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use tokio::sync::Notify;

type Queue = DrrQueue<Arc<str>, Arc<Event>>;

/// Metric handles, registered once per route so the hot path does no
/// registry lookups.
struct RouteMetrics {
    active: metrics::Gauge,
    bytes: metrics::Gauge,
    evictions: [metrics::Counter; 3],
    starved: [metrics::Counter; 3],
    refused: [metrics::Counter; 3],
}

impl RouteMetrics {
    fn new(subscriber: &'static str) -> Self {
        let per_class = |name: &'static str| {
            PrincipalClass::ALL
                .map(|c| metrics::counter!(name, "subscriber" => subscriber, "class" => c.as_str()))
        };
        Self {
            active: metrics::gauge!(ACTIVE_PRINCIPALS, "subscriber" => subscriber),
            bytes: metrics::gauge!(BUDGET_IN_USE_BYTES, "subscriber" => subscriber),
            evictions: per_class(BYTE_EVICTIONS_TOTAL),
            starved: per_class(QUANTUM_STARVED_TOTAL),
            refused: per_class(ROUTE_REFUSED_TOTAL),
        }
    }
}

/// The queue plus what has been reported to the gauges, so updates are
/// deltas (several routes may share a subscriber label).
struct State {
    queue: Queue,
    reported_active: usize,
    reported_bytes: usize,
}

/// One routed subscription's entry in the bus's routes table.
pub(crate) struct Route {
    pub(crate) pattern: TopicPattern,
    subscriber: &'static str,
    state: Mutex<State>,
    pub(crate) notify: Notify,
    metrics: RouteMetrics,
    // Relaxed: log throttling only; a race logs one extra warning at most.
    warned_eviction: AtomicBool,
    warned_refusal: AtomicBool,
}

/// Observer that turns DRR events into metrics and logs.
struct Observe<'a> {
    route: &'a Route,
}

impl DrrObserver<Arc<str>, Arc<Event>> for Observe<'_> {
    fn evicted(&mut self, principal: &Arc<str>, msg: Msg<Arc<Event>>, reason: EvictReason) {
        let class = PrincipalClass::of(principal);
        self.route.metrics.evictions[class.index()].increment(1);
        // Warn on the first eviction of a route only; after that the metric speaks.
        let first = !self.route.warned_eviction.swap(true, Ordering::Relaxed);
        if first {
            tracing::warn!(target: "sluice.bus", subscriber = self.route.subscriber,
                principal = %principal, bytes = msg.cost, ?reason,
                "routed queue over budget, evicting oldest messages");
        } else {
            tracing::debug!(target: "sluice.bus", subscriber = self.route.subscriber,
                principal = %principal, bytes = msg.cost, ?reason, "routed message evicted");
        }
    }

    fn starved(&mut self, principal: &Arc<str>) {
        self.route.metrics.starved[PrincipalClass::of(principal).index()].increment(1);
    }
}

impl Route {
    pub(crate) fn new(pattern: TopicPattern, subscriber: &'static str, config: DrrConfig) -> Self {
        Self {
            pattern,
            subscriber,
            state: Mutex::new(State {
                queue: config.build(),
                reported_active: 0,
                reported_bytes: 0,
            }),
            notify: Notify::new(),
            metrics: RouteMetrics::new(subscriber),
            warned_eviction: AtomicBool::new(false),
            warned_refusal: AtomicBool::new(false),
        }
    }

    fn report(&self, st: &mut State) {
        let (active, bytes) = (st.queue.active_principals(), st.queue.bytes_in_use());
        if active != st.reported_active {
            self.metrics
                .active
                .increment(active as f64 - st.reported_active as f64);
            st.reported_active = active;
        }
        if bytes != st.reported_bytes {
            self.metrics
                .bytes
                .increment(bytes as f64 - st.reported_bytes as f64);
            st.reported_bytes = bytes;
        }
    }

    /// Queues `event` under its principal; wakes the receiver on success.
    pub(crate) fn push(
        &self,
        event: Arc<Event>,
        now: Instant,
    ) -> Result<(), PushError<Arc<Event>>> {
        let principal = Arc::clone(&event.principal);
        let cost = event.cost();
        let msg = if event.control {
            Msg::control(event, cost, now)
        } else {
            Msg::new(event, cost, now)
        };
        let mut st = self.state.lock();
        let res = st.queue.push(principal, msg, &mut Observe { route: self });
        self.report(&mut st);
        drop(st);
        match &res {
            // Release the lock before waking so the woken receiver does not
            // immediately contend for it.
            Ok(()) => self.notify.notify_one(),
            Err(e) => self.on_refused(e),
        }
        res
    }

    fn on_refused(&self, err: &PushError<Arc<Event>>) {
        let (principal, size) = match err {
            PushError::Oversize { msg, .. }
            | PushError::BudgetExhausted(msg)
            | PushError::PrincipalFull(msg) => (&msg.value.principal, msg.cost),
            _ => return,
        };
        self.metrics.refused[PrincipalClass::of(principal).index()].increment(1);
        // A flood of oversize messages must not become a flood of log lines:
        // the first refusal per route is a warning, the rest are debug.
        if !self.warned_refusal.swap(true, Ordering::Relaxed) {
            tracing::warn!(target: "sluice.audit.bus", security_event = true,
                subscriber = self.subscriber, principal = %principal, size,
                error = %err, "routed message refused");
        } else {
            tracing::debug!(target: "sluice.audit.bus", security_event = true,
                subscriber = self.subscriber, principal = %principal, size,
                error = %err, "routed message refused");
        }
    }

    pub(crate) fn pop(&self) -> Option<Arc<Event>> {
        let mut st = self.state.lock();
        let out = st.queue.pop(&mut Observe { route: self });
        self.report(&mut st);
        out.map(|d| d.msg.value)
    }

    pub(crate) fn try_drain(&self, byte_budget: usize) -> Vec<Arc<Event>> {
        let mut out = Vec::new();
        let mut st = self.state.lock();
        st.queue
            .try_drain(byte_budget, &mut out, &mut Observe { route: self });
        self.report(&mut st);
        drop(st);
        out.into_iter().map(|d| d.msg.value).collect()
    }

    /// The subscriber label of this route's metrics (its actor type, for the host).
    pub(crate) fn subscriber(&self) -> &'static str {
        self.subscriber
    }

    /// The `n` principals holding the most queued bytes, largest first.
    pub(crate) fn top_principals(&self, n: usize) -> Vec<(Arc<str>, usize)> {
        self.state.lock().queue.top_principals_by_bytes(n)
    }

    pub(crate) fn stats(&self) -> RouteStats {
        let st = self.state.lock();
        let q = &st.queue;
        RouteStats {
            len: q.len(),
            bytes_in_use: q.bytes_in_use(),
            active_principals: q.active_principals(),
            oldest_enqueued_at: q.oldest_enqueued_at(),
            evicted_total: q.evicted_total(),
            starved_total: q.starved_total(),
            refused_total: q.refused_total(),
        }
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        // Take this route's share back out of the summed gauges.
        let st = self.state.get_mut();
        self.metrics.active.decrement(st.reported_active as f64);
        self.metrics.bytes.decrement(st.reported_bytes as f64);
    }
}
