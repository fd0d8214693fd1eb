//! The host's event bus: guest `bus.publish`, the IPC rate limiter in front of it (and of
//! `tell`/`dispatch`), and one pump task per subscription moving events into the subscriber's
//! mailbox.
//!
//! # Delivery
//! An event reaches a subscriber as a turn of its `handle`: msg-type = the event's topic,
//! payload = the event's payload, `principal` = the publisher's principal, `sender` = the
//! publishing actor (none when the host or an embedder published). Deliveries are the
//! runtime's own messages: never refused by admission caps; they carry the default
//! `call_timeout_ms` deadline from the moment they enter the mailbox, as timer deliveries do.
//!
//! # Traces
//! An event published during a traced turn carries that turn's span context. Each hand-over
//! to a subscriber then runs in a `bus.deliver` span (`topic`, `subscriber`, `outcome`, and
//! `retries` when refused deliveries were held) that is its child, and the subscriber's turn
//! is a child of that. An untraced event (traces off) creates no span at all.
//!
//! At most `delivery_window` events of one subscription are queued or running in the
//! subscriber's mailbox at a time (a semaphore permit rides in each message and is released
//! when the message is dropped, after its turn). The backlog therefore waits in the
//! subscription — a routed one drains it fairly across principals, under its byte budget —
//! rather than in the mailbox, where it would be FIFO.
//!
//! # Nothing is lost silently
//! - A refused delivery (full `error` mailbox, actor type not deployed yet, actor stopped by
//!   its supervisor) is retried with the mailbox's retry hint or a backoff (10 ms doubling to
//!   1 s); the event is held, never dropped. Counted in `sluice_bus_delivery_retries_total`.
//!   Meanwhile the backlog grows in the subscription, where routed eviction and broadcast lag
//!   are counted.
//! - A `drop_newest` mailbox that drops the event applies its strategy as for any tell:
//!   counted as `outcome="dropped"` here and in the mailbox's `dropped_newest` counter. A
//!   `drop_oldest` mailbox that later displaces a delivered event counts it in its
//!   `dropped_oldest` counter (the event was delivered, then displaced).
//! - A delivery turn skipped because its deadline passed while queued is counted in
//!   `sluice_turns_skipped_total`; the delivery window keeps that queue short.
//! - At shutdown, events still queued in subscriptions are discarded, as mailboxes are.
//!
//! # IPC rate limiter
//! Configured by `[bus.rate_limit]`; absent, [`HostBus::check_ipc`] is one branch. A quota
//! of 0 refuses every non-empty payload of that principal (`INVALID_ARGUMENT`, since waiting
//! cannot help): a kill switch, not "unlimited".

mod dispatch;
mod pump;
mod stats;
mod subscribe;

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;
use sluice_bus::{
    BusConfig, DrrConfig, Event, EventBus, IpcRateLimiter, PublishError, PublishReport,
    RateLimitError,
};
use tokio::sync::watch;

use crate::config::BusSettings;
use crate::error::{ActorError, ErrorCode};
use crate::id::ActorId;

pub(crate) use stats::Shared;
pub use stats::{DispatchStats, SubscriptionStats};

/// Counter `{actor_type, outcome}`: events handed to a subscriber's mailbox
/// (`delivered`), or dropped there by a `drop_newest` strategy (`dropped`).
pub const DELIVERIES_TOTAL: &str = "sluice_bus_deliveries_total";
/// Counter `{actor_type}`: refused deliveries that were held and retried.
pub const DELIVERY_RETRIES_TOTAL: &str = "sluice_bus_delivery_retries_total";
/// Counter `{reason}`: guest publishes refused (`invalid_topic`, `rate_limited`, `too_large`).
pub const PUBLISH_REFUSED_TOTAL: &str = "sluice_bus_publish_refused_total";

/// The bus as the host owns it.
pub(crate) struct HostBus {
    pub bus: EventBus,
    pub limiter: Option<IpcRateLimiter>,
    /// Events of one subscription queued or running in its subscriber's mailbox at most.
    pub window: usize,
    pub settings: BusSettings,
    max_payload_bytes: usize,
    pub subs: Mutex<Vec<Arc<Shared>>>,
    pub stop: watch::Sender<bool>,
}

impl HostBus {
    pub fn new(s: &BusSettings, max_payload_bytes: usize) -> Self {
        let bus = BusConfig {
            broadcast_capacity: s.broadcast_capacity,
            route: DrrConfig {
                budget_bytes: s.route_budget_bytes,
                max_per_principal: s.max_per_principal,
                min_quantum_bytes: s.min_quantum_bytes,
            },
            // The host checks the limiter itself, before the bus, for every IPC kind.
            rate_limiter: None,
        }
        .build();
        Self {
            bus,
            limiter: s
                .rate_limit
                .as_ref()
                .map(|r| IpcRateLimiter::new(r.to_config())),
            window: s.delivery_window.max(1),
            settings: s.clone(),
            max_payload_bytes,
            subs: Mutex::new(Vec::new()),
            stop: watch::channel(false).0,
        }
    }

    /// Ends every pump (the host is shutting down).
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    pub fn stats(&self) -> Vec<SubscriptionStats> {
        self.subs.lock().iter().map(|s| s.stats()).collect()
    }
}

impl HostBus {
    /// Charges `bytes` of IPC by an actor of `from`'s type on behalf of `principal`.
    /// Without a configured limiter this is one branch.
    pub(crate) fn check_ipc(
        &self,
        from: &ActorId,
        principal: &str,
        bytes: usize,
    ) -> Result<(), ActorError> {
        match &self.limiter {
            None => Ok(()),
            Some(l) => l
                .check(from.actor_type(), principal, bytes)
                .map_err(rate_error),
        }
    }

    /// Publishes on behalf of `principal`; `source` is the publishing actor (rate-limited per
    /// its type), `None` for the host or an embedder (not rate-limited). `trace` is the
    /// publisher's span context (`None` when traces are off): each delivery's `bus.deliver`
    /// span is its child.
    pub(crate) fn publish(
        &self,
        source: Option<&ActorId>,
        principal: &Arc<str>,
        topic: &str,
        payload: Vec<u8>,
        trace: Option<sluice_trace::TraceParent>,
    ) -> Result<PublishReport, ActorError> {
        let refused = |reason: &'static str| {
            metrics::counter!(PUBLISH_REFUSED_TOTAL, "reason" => reason).increment(1);
        };
        if payload.len() > self.max_payload_bytes {
            refused("too_large");
            return Err(ActorError::invalid_argument(format!(
                "payload of {} bytes exceeds max_payload_bytes={}",
                payload.len(),
                self.max_payload_bytes
            )));
        }
        // The topic first: a malformed publish must not spend the principal's budget.
        if let Err(e) = sluice_flow::topic::validate_topic(topic) {
            refused("invalid_topic");
            return Err(ActorError::verbatim(
                ErrorCode::InvalidArgument,
                e.to_string(),
            ));
        }
        if let Some(from) = source
            && let Err(e) = self.check_ipc(from, principal, payload.len())
        {
            refused("rate_limited");
            return Err(e);
        }
        let mut ev = Event::new(topic, payload)
            .with_principal(principal.clone())
            .with_trace(trace);
        if let Some(from) = source {
            ev = ev.with_source(from.as_str());
        }
        self.bus.publish(ev).map_err(|e| match e {
            PublishError::RateLimited(r) => rate_error(r),
            other => ActorError::verbatim(ErrorCode::InvalidArgument, other.to_string()),
        })
    }
}

/// A refused rate-limit check as guests see it.
pub(crate) fn rate_error(e: RateLimitError) -> ActorError {
    match e.retry_after_ms() {
        Some(ms) => ActorError::new(ErrorCode::ResourceExhausted, "ipc rate limit exceeded")
            .with_retry_after(ms),
        None => ActorError::verbatim(ErrorCode::InvalidArgument, e.to_string()),
    }
}

/// Metric labels must be `&'static str`; actor type names come from the (bounded) config,
/// so each distinct name is leaked once.
pub(crate) fn intern(s: &str) -> &'static str {
    static NAMES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut names = NAMES.lock();
    let names = names.get_or_insert_with(HashSet::new);
    if let Some(n) = names.get(s) {
        return n;
    }
    let leaked: &'static str = Box::leak(s.to_string().into_boxed_str());
    names.insert(leaked);
    leaked
}
