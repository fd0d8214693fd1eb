//! [`EventReceiver`]: a handle on the shared broadcast ring, optionally topic-filtered.

use crate::Event;
use crate::metrics::RECEIVER_LAGGED_TOTAL;
use sluice_flow::topic::TopicPattern;
use std::sync::Arc;
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};

/// After this many consecutive non-matching events a filtered receiver
/// yields, so draining a backlog never monopolises a worker. Not 1: yielding
/// on every event would slow the drain enough to cause self-inflicted lag.
pub(crate) const YIELD_AFTER_SKIPPED: u32 = 32;

/// Receives from the shared broadcast ring. All receivers share one ring of
/// [`BusConfig::broadcast_capacity`](crate::BusConfig::broadcast_capacity)
/// slots; one that falls behind skips ahead to the oldest retained event and
/// counts what it lost ([`lagged`](Self::lagged), metric
/// `sluice_bus_receiver_lagged_total{subscriber}`).
#[derive(Debug)]
pub struct EventReceiver {
    rx: broadcast::Receiver<Arc<Event>>,
    pattern: Option<TopicPattern>,
    subscriber: &'static str,
    lagged: u64,
    lag_counter: metrics::Counter,
}

impl EventReceiver {
    pub(crate) fn new(
        rx: broadcast::Receiver<Arc<Event>>,
        pattern: Option<TopicPattern>,
        subscriber: &'static str,
    ) -> Self {
        Self {
            rx,
            pattern,
            subscriber,
            lagged: 0,
            lag_counter: metrics::counter!(RECEIVER_LAGGED_TOTAL, "subscriber" => subscriber),
        }
    }

    /// The bounded label this receiver reports under.
    pub fn subscriber(&self) -> &'static str {
        self.subscriber
    }

    /// Events published since this receiver's position, before its topic
    /// filter — including any already overwritten in the ring, which the next
    /// receive skips and counts as lag. A depth for dashboards.
    pub fn len(&self) -> usize {
        self.rx.len()
    }

    /// Nothing is buffered for this receiver.
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }

    /// Events this receiver lost to lag since it was created.
    pub fn lagged(&self) -> u64 {
        self.lagged
    }

    fn wants(&self, event: &Event) -> bool {
        self.pattern
            .as_ref()
            .is_none_or(|p| p.matches(&event.topic))
    }

    fn on_lag(&mut self, count: u64) {
        self.lagged = self.lagged.saturating_add(count);
        self.lag_counter.increment(count);
        tracing::error!(
            target: "sluice.bus",
            security_event = true,
            skipped = count,
            subscriber = self.subscriber,
            "event receiver lagged, events dropped"
        );
    }

    /// Waits for the next matching event; `None` once every bus handle is gone.
    pub async fn recv(&mut self) -> Option<Arc<Event>> {
        let mut skipped = 0u32;
        loop {
            match self.rx.recv().await {
                Ok(event) if self.wants(&event) => return Some(event),
                Ok(_) => {
                    skipped += 1;
                    if skipped >= YIELD_AFTER_SKIPPED {
                        skipped = 0;
                        tokio::task::yield_now().await;
                    }
                }
                Err(RecvError::Lagged(count)) => {
                    self.on_lag(count);
                    // Yield before catching up: lag means a storm, the worst
                    // moment to hold a worker.
                    skipped = 0;
                    tokio::task::yield_now().await;
                }
                Err(RecvError::Closed) => return None,
            }
        }
    }

    /// Takes the next matching event if one is already buffered.
    pub fn try_recv(&mut self) -> Option<Arc<Event>> {
        loop {
            match self.rx.try_recv() {
                Ok(event) if self.wants(&event) => return Some(event),
                Ok(_) => {}
                Err(TryRecvError::Lagged(count)) => self.on_lag(count),
                Err(TryRecvError::Empty | TryRecvError::Closed) => return None,
            }
        }
    }
}
