//! [`RoutedReceiver`]: the consuming end of one routed subscription.

use super::Route;
use crate::Event;
use crate::bus::Inner;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// A snapshot of one route's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteStats {
    /// Messages queued.
    pub len: usize,
    /// Bytes charged against the route budget.
    pub bytes_in_use: usize,
    /// Principals with a sub-queue.
    pub active_principals: usize,
    /// Enqueue time of the oldest queued message (queue age).
    pub oldest_enqueued_at: Option<Instant>,
    /// Messages evicted since the subscription began.
    pub evicted_total: u64,
    /// DRR turns that ended with nothing sent.
    pub starved_total: u64,
    /// Pushes refused (oversize, or budget pinned by control messages).
    pub refused_total: u64,
}

/// Drains one routed subscription in deficit round-robin order across
/// principals. Dropping it removes the subscription from the bus.
pub struct RoutedReceiver {
    pub(crate) id: u64,
    pub(crate) route: Arc<Route>,
    pub(crate) bus: Weak<Inner>,
}

impl RoutedReceiver {
    /// Waits for the next event, at most `timeout` if given; `None` on timeout.
    ///
    /// Never misses a wake-up: `Notify::notify_one` stores a permit when no
    /// one is waiting, so a push between the empty check and the wait makes
    /// the wait return at once.
    pub async fn recv(&mut self, timeout: Option<Duration>) -> Option<Arc<Event>> {
        let deadline = timeout.map(|d| tokio::time::Instant::now() + d);
        loop {
            if let Some(event) = self.route.pop() {
                return Some(event);
            }
            let notified = self.route.notify.notified();
            match deadline {
                Some(at) => tokio::time::timeout_at(at, notified).await.ok()?,
                None => notified.await,
            }
        }
    }

    /// Takes what is queued, up to `byte_budget` bytes (at least one event if
    /// any is queued), without waiting.
    pub fn try_drain(&mut self, byte_budget: usize) -> Vec<Arc<Event>> {
        self.route.try_drain(byte_budget)
    }

    /// The pattern this subscription matches.
    pub fn pattern(&self) -> &str {
        self.route.pattern.as_str()
    }

    /// Depth, bytes, age and counters of this subscription's queue.
    pub fn stats(&self) -> RouteStats {
        self.route.stats()
    }

    /// A handle that reads [`stats`](Self::stats) from elsewhere (a status
    /// page) while this receiver is owned by its consuming task.
    pub fn stats_handle(&self) -> RouteStatsHandle {
        RouteStatsHandle {
            route: Arc::clone(&self.route),
        }
    }
}

/// Reads one routed subscription's [`RouteStats`] without owning its receiver.
#[derive(Clone)]
pub struct RouteStatsHandle {
    route: Arc<Route>,
}

impl RouteStatsHandle {
    /// Depth, bytes, age and counters of the subscription's queue.
    pub fn stats(&self) -> RouteStats {
        self.route.stats()
    }
}

impl std::fmt::Debug for RouteStatsHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteStatsHandle")
            .field("pattern", &self.route.pattern.as_str())
            .finish()
    }
}

impl std::fmt::Debug for RoutedReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoutedReceiver")
            .field("id", &self.id)
            .field("pattern", &self.route.pattern.as_str())
            .finish()
    }
}

impl Drop for RoutedReceiver {
    fn drop(&mut self) {
        if let Some(bus) = self.bus.upgrade() {
            bus.routes.write().remove(&self.id);
        }
    }
}
