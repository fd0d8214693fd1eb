//! [`EventBus`]: publish once, reach the broadcast ring and every matching routed subscription.

use crate::metrics::EVENTS_PUBLISHED_TOTAL;
use crate::route::Route;
use crate::{Event, EventReceiver, IpcRateLimiter, RouteStats, RoutedReceiver};
use parking_lot::RwLock;
use sluice_flow::drr::DrrConfig;
use sluice_flow::ratelimit::RateLimitError;
use sluice_flow::topic::{TopicError, TopicPattern, validate_topic};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tokio::sync::broadcast;

/// Default slots of the shared broadcast ring.
pub const DEFAULT_BROADCAST_CAPACITY: usize = 1024;

/// Bus bounds. `Default` gives the seed's values; the config is also the
/// factory ([`BusConfig::build`]).
#[derive(Debug, Clone, Default)]
pub struct BusConfig {
    /// Slots in the shared broadcast ring (default [`DEFAULT_BROADCAST_CAPACITY`]; 0 means default).
    pub broadcast_capacity: usize,
    /// Budget, per-principal cap and quantum floor of every routed subscription
    /// (default: 1 MiB, 256, 4096 bytes).
    pub route: DrrConfig,
    /// If set, [`EventBus::publish_from`] checks this limiter first.
    pub rate_limiter: Option<IpcRateLimiter>,
}

impl BusConfig {
    /// Builds the bus.
    pub fn build(self) -> EventBus {
        let capacity = if self.broadcast_capacity == 0 {
            DEFAULT_BROADCAST_CAPACITY
        } else {
            self.broadcast_capacity
        };
        let (tx, _) = broadcast::channel(capacity);
        EventBus {
            inner: Arc::new(Inner {
                tx,
                routes: RwLock::new(HashMap::new()),
                next_route: AtomicU64::new(0),
                route_config: self.route,
                rate_limiter: self.rate_limiter,
            }),
        }
    }
}

/// Why a publish was refused. Nothing was delivered anywhere.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// The topic breaks the grammar (`INVALID_ARGUMENT`).
    #[error(transparent)]
    InvalidTopic(#[from] TopicError),
    /// Refused by the IPC rate limiter or the 5 MiB payload ceiling.
    #[error(transparent)]
    RateLimited(#[from] RateLimitError),
}

impl PublishError {
    /// The canonical error code carried across the guest boundary.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidTopic(e) => e.code(),
            Self::RateLimited(e) => e.code(),
        }
    }
}

/// What one publish reached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PublishReport {
    /// Broadcast receivers alive at send time (before their topic filters).
    pub broadcast_receivers: usize,
    /// Routed subscriptions that queued the event.
    pub routed: usize,
    /// Routed subscriptions that refused it (larger than their whole budget,
    /// or their budget is pinned by control messages); logged and counted.
    pub routes_refused: usize,
}

pub(crate) struct Inner {
    tx: broadcast::Sender<Arc<Event>>,
    pub(crate) routes: RwLock<HashMap<u64, Arc<Route>>>,
    next_route: AtomicU64,
    route_config: DrrConfig,
    rate_limiter: Option<IpcRateLimiter>,
}

/// One routed subscription as [`EventBus::route_summaries`] reports it.
#[derive(Debug, Clone)]
pub struct RouteSummary {
    /// The label its metrics carry (the subscribing actor type, for the host).
    pub subscriber: &'static str,
    /// The topic pattern.
    pub pattern: String,
    /// Depth, bytes, age and counters.
    pub stats: RouteStats,
    /// The principals holding the most queued bytes, largest first.
    pub top_principals: Vec<(Arc<str>, usize)>,
}

/// The event bus. Cheap to clone; clones share the ring, the routes table and
/// the limiter, so a subscription made through one clone sees publishes from
/// every other.
#[derive(Clone)]
pub struct EventBus {
    inner: Arc<Inner>,
}

impl Default for EventBus {
    fn default() -> Self {
        BusConfig::default().build()
    }
}

impl std::fmt::Debug for EventBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBus")
            .field("routes", &self.inner.routes.read().len())
            .field("broadcast_receivers", &self.inner.tx.receiver_count())
            .finish()
    }
}

impl EventBus {
    /// A bus with default bounds.
    pub fn new() -> Self {
        Self::default()
    }

    /// Publishes `event`: broadcast ring first, then every matching routed
    /// subscription. Sets `published_at`. Refused only for an invalid topic or
    /// a payload above the 5 MiB ceiling; per-route refusals are reported in
    /// the [`PublishReport`] (and logged and counted), not as an error, since
    /// other subscribers did receive the event.
    pub fn publish(&self, mut event: Event) -> Result<PublishReport, PublishError> {
        validate_topic(&event.topic)?;
        sluice_flow::ratelimit::check_payload_size(event.payload.len())?;
        let now = Instant::now();
        event.published_at = Some(now);
        let kind = event.kind;
        let event = Arc::new(event);
        // Broadcast first: a slow routed enqueue never delays untargeted consumers.
        let broadcast_receivers = self.inner.tx.send(Arc::clone(&event)).unwrap_or(0);
        let mut report = PublishReport {
            broadcast_receivers,
            ..PublishReport::default()
        };
        // Patterns are immutable, so matching needs no per-route lock; the
        // table's read lock is held only while collecting.
        let matched: Vec<Arc<Route>> = {
            let routes = self.inner.routes.read();
            routes
                .values()
                .filter(|r| r.pattern.matches(&event.topic))
                .cloned()
                .collect()
        };
        for route in matched {
            match route.push(Arc::clone(&event), now) {
                Ok(()) => report.routed += 1,
                Err(_) => report.routes_refused += 1,
            }
        }
        metrics::counter!(EVENTS_PUBLISHED_TOTAL, "kind" => kind).increment(1);
        Ok(report)
    }

    /// Checks the configured [`IpcRateLimiter`] for `(actor_type, event.principal)`,
    /// then publishes. Without a limiter this is [`publish`](Self::publish).
    pub fn publish_from(
        &self,
        actor_type: &str,
        event: Event,
    ) -> Result<PublishReport, PublishError> {
        if let Some(limiter) = &self.inner.rate_limiter {
            limiter.check(actor_type, &event.principal, event.payload.len())?;
        }
        self.publish(event)
    }

    /// A receiver of every event on the broadcast ring. `subscriber` is the
    /// lag metric's label: a constant chosen in code, never guest input.
    pub fn subscribe(&self, subscriber: &'static str) -> EventReceiver {
        EventReceiver::new(self.inner.tx.subscribe(), None, subscriber)
    }

    /// A broadcast receiver filtered by `pattern` (client-side).
    pub fn subscribe_topic(
        &self,
        pattern: &str,
        subscriber: &'static str,
    ) -> Result<EventReceiver, TopicError> {
        let pattern = TopicPattern::parse(pattern)?;
        Ok(EventReceiver::new(
            self.inner.tx.subscribe(),
            Some(pattern),
            subscriber,
        ))
    }

    /// A routed subscription: its own per-principal queues under its own byte
    /// budget. Two subscriptions with the same pattern each get every event.
    /// `subscriber` labels the route's metrics (summed over routes sharing
    /// it); it must come from a bounded set — a code constant, or an actor
    /// type name from the app config — never from guest input.
    pub fn subscribe_routed(
        &self,
        pattern: &str,
        subscriber: &'static str,
    ) -> Result<RoutedReceiver, TopicError> {
        let pattern = TopicPattern::parse(pattern)?;
        // Relaxed: the id only has to be unique, which fetch_add guarantees.
        let id = self.inner.next_route.fetch_add(1, Ordering::Relaxed);
        let route = Arc::new(Route::new(pattern, subscriber, self.inner.route_config));
        self.inner.routes.write().insert(id, Arc::clone(&route));
        Ok(RoutedReceiver {
            id,
            route,
            bus: Arc::downgrade(&self.inner),
        })
    }

    /// Every routed subscription, oldest first, with its stats and the `top` principals
    /// holding the most queued bytes (for a status page: `O(principals)` per route).
    pub fn route_summaries(&self, top: usize) -> Vec<RouteSummary> {
        let mut routes: Vec<(u64, Arc<Route>)> = self
            .inner
            .routes
            .read()
            .iter()
            .map(|(id, r)| (*id, Arc::clone(r)))
            .collect();
        routes.sort_unstable_by_key(|(id, _)| *id);
        routes
            .into_iter()
            .map(|(_, r)| RouteSummary {
                subscriber: r.subscriber(),
                pattern: r.pattern.as_str().to_string(),
                stats: r.stats(),
                top_principals: r.top_principals(top),
            })
            .collect()
    }

    /// Routed subscriptions currently registered.
    pub fn routed_subscriptions(&self) -> usize {
        self.inner.routes.read().len()
    }

    /// The limiter [`publish_from`](Self::publish_from) uses, if any.
    pub fn rate_limiter(&self) -> Option<&IpcRateLimiter> {
        self.inner.rate_limiter.as_ref()
    }
}
