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
//! Configured by `[bus.rate_limit]`; absent, [`HostInner::check_ipc`] is one branch. A quota
//! of 0 refuses every non-empty payload of that principal (`INVALID_ARGUMENT`, since waiting
//! cannot help): a kill switch, not "unlimited".

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sluice_bus::{
    BusConfig, DispatchKey, DispatcherConfig, DrrConfig, Event, EventBus, EventReceiver,
    IpcRateLimiter, PublishError, PublishReport, RateLimitError, RouteStatsHandle, RoutedReceiver,
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot, watch};

use crate::actor::{Message, Reply};
use crate::config::{BusSettings, Subscription, SubscriptionMode};
use crate::error::{ActorError, ErrorCode, LoadError, TellReceipt};
use crate::host::HostInner;
use crate::registry::ActorId;

/// Counter `{actor_type, outcome}`: events handed to a subscriber's mailbox
/// (`delivered`), or dropped there by a `drop_newest` strategy (`dropped`).
pub const DELIVERIES_TOTAL: &str = "sluice_bus_deliveries_total";
/// Counter `{actor_type}`: refused deliveries that were held and retried.
pub const DELIVERY_RETRIES_TOTAL: &str = "sluice_bus_delivery_retries_total";
/// Counter `{reason}`: guest publishes refused (`invalid_topic`, `rate_limited`, `too_large`).
pub const PUBLISH_REFUSED_TOTAL: &str = "sluice_bus_publish_refused_total";

/// Longest wait between two attempts to deliver one held event.
const MAX_BACKOFF: Duration = Duration::from_secs(1);
const MIN_BACKOFF: Duration = Duration::from_millis(10);

/// Metric labels must be `&'static str`; actor type names come from the (bounded) config,
/// so each distinct name is leaked once.
fn intern(s: &str) -> &'static str {
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

struct Shared {
    sub: Subscription,
    /// The receiver: `Type/key`, or `Type/{principal}` for a dispatch subscription.
    target: ActorId,
    /// A dispatch subscription's dispatcher stats (set once its dispatcher exists).
    dispatch: std::sync::OnceLock<Box<dyn Fn() -> DispatchStats + Send + Sync>>,
    delivered: AtomicU64,
    dropped: AtomicU64,
    retried: AtomicU64,
    lagged: AtomicU64,
    route: Option<RouteStatsHandle>,
    m_delivered: metrics::Counter,
    m_dropped: metrics::Counter,
    m_retried: metrics::Counter,
}

impl Shared {
    /// An event this subscription dropped (and will never deliver): counted, never silent.
    fn count_dropped(&self) {
        self.dropped.fetch_add(1, Relaxed);
        self.m_dropped.increment(1);
    }

    fn stats(&self) -> SubscriptionStats {
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

/// The bus as the host owns it.
pub(crate) struct HostBus {
    pub bus: EventBus,
    pub limiter: Option<IpcRateLimiter>,
    window: usize,
    subs: Mutex<Vec<Arc<Shared>>>,
    stop: watch::Sender<bool>,
}

impl HostBus {
    pub fn new(s: &BusSettings) -> Self {
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

impl HostInner {
    /// Charges `bytes` of IPC by an actor of `from`'s type on behalf of `principal`.
    /// Without a configured limiter this is one branch.
    pub(crate) fn check_ipc(
        &self,
        from: &ActorId,
        principal: &str,
        bytes: usize,
    ) -> Result<(), ActorError> {
        match &self.bus.limiter {
            None => Ok(()),
            Some(l) => l
                .check(from.actor_type(), principal, bytes)
                .map_err(rate_error),
        }
    }

    /// Publishes on behalf of `principal`; `source` is the publishing actor (rate-limited per
    /// its type), `None` for the host or an embedder (not rate-limited).
    pub(crate) fn publish(
        &self,
        source: Option<&ActorId>,
        principal: &Arc<str>,
        topic: &str,
        payload: Vec<u8>,
    ) -> Result<PublishReport, ActorError> {
        let refused = |reason: &'static str| {
            metrics::counter!(PUBLISH_REFUSED_TOTAL, "reason" => reason).increment(1);
        };
        if payload.len() > self.config.max_payload_bytes {
            refused("too_large");
            return Err(ActorError::invalid_argument(format!(
                "payload of {} bytes exceeds max_payload_bytes={}",
                payload.len(),
                self.config.max_payload_bytes
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
        let mut ev = Event::new(topic, payload).with_principal(principal.clone());
        if let Some(from) = source {
            ev = ev.with_source(from.as_str());
        }
        self.bus.bus.publish(ev).map_err(|e| match e {
            PublishError::RateLimited(r) => rate_error(r),
            other => ActorError::verbatim(ErrorCode::InvalidArgument, other.to_string()),
        })
    }

    /// Registers `sub` and starts its pump. A routed subscription queues events from now on,
    /// even before its actor type is deployed.
    pub(crate) fn subscribe(self: &Arc<Self>, sub: Subscription) -> Result<(), LoadError> {
        sub.validate()?;
        let target = ActorId::parse(&sub.receiver()).map_err(|e| LoadError::Subscription {
            actor_type: sub.actor_type.clone(),
            topic: sub.topic.clone(),
            reason: e.to_string(),
        })?;
        let label = intern(&sub.actor_type);
        let bad = |e: sluice_bus::TopicError| LoadError::Subscription {
            actor_type: sub.actor_type.clone(),
            topic: sub.topic.clone(),
            reason: e.to_string(),
        };
        let source = match sub.mode {
            SubscriptionMode::Routed | SubscriptionMode::Dispatch => Source::Routed(
                self.bus
                    .bus
                    .subscribe_routed(&sub.topic, label)
                    .map_err(bad)?,
            ),
            SubscriptionMode::Broadcast => Source::Broadcast(
                self.bus
                    .bus
                    .subscribe_topic(&sub.topic, label)
                    .map_err(bad)?,
            ),
        };
        let shared = Arc::new(Shared {
            route: match &source {
                Source::Routed(rx) => Some(rx.stats_handle()),
                Source::Broadcast(_) => None,
            },
            target,
            dispatch: std::sync::OnceLock::new(),
            delivered: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            retried: AtomicU64::new(0),
            lagged: AtomicU64::new(0),
            m_delivered: metrics::counter!(DELIVERIES_TOTAL, "actor_type" => label, "outcome" => "delivered"),
            m_dropped: metrics::counter!(DELIVERIES_TOTAL, "actor_type" => label, "outcome" => "dropped"),
            m_retried: metrics::counter!(DELIVERY_RETRIES_TOTAL, "actor_type" => label),
            sub,
        });
        self.bus.subs.lock().push(shared.clone());
        if shared.sub.mode == SubscriptionMode::Dispatch {
            let Source::Routed(rx) = source else {
                unreachable!("dispatch subscriptions take routed intake")
            };
            let config = DispatcherConfig {
                queue_capacity: self.config.bus.dispatch_queue_capacity,
                idle_grace: Duration::from_millis(self.config.bus.dispatch_idle_ms),
                max_queues_per_actor_type: self.config.bus.dispatch_max_queues_per_actor_type,
            };
            tokio::spawn(run_dispatch(
                Arc::downgrade(self),
                shared,
                config,
                self.bus.stop.subscribe(),
                rx,
            ));
            return Ok(());
        }
        let pump = Pump {
            host: Arc::downgrade(self),
            shared,
            window: Arc::new(Semaphore::new(self.bus.window)),
            stop: self.bus.stop.subscribe(),
        };
        tokio::spawn(pump.run(source));
        Ok(())
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

enum Source {
    Routed(RoutedReceiver),
    Broadcast(EventReceiver),
}

struct Pump {
    host: Weak<HostInner>,
    shared: Arc<Shared>,
    window: Arc<Semaphore>,
    stop: watch::Receiver<bool>,
}

impl Pump {
    async fn run(mut self, mut source: Source) {
        loop {
            // A slot first: while the window is full the backlog stays in the subscription.
            let permit = tokio::select! {
                p = self.window.clone().acquire_owned() => p.expect("the semaphore is never closed"),
                _ = self.stop.changed() => return,
            };
            let event = match &mut source {
                Source::Routed(rx) => tokio::select! {
                    ev = rx.recv(None) => ev,
                    _ = self.stop.changed() => return,
                },
                Source::Broadcast(rx) => {
                    let ev = tokio::select! {
                        ev = rx.recv() => match ev {
                            Some(ev) => Some(ev),
                            None => return,
                        },
                        _ = self.stop.changed() => return,
                    };
                    self.shared.lagged.store(rx.lagged(), Relaxed);
                    ev
                }
            };
            let Some(event) = event else { continue };
            if !self.deliver(event, permit).await {
                return;
            }
        }
    }

    /// Hands `event` to the subscriber's mailbox, holding it through refusals. False when the
    /// host is gone or shutting down.
    async fn deliver(&mut self, event: Arc<Event>, permit: OwnedSemaphorePermit) -> bool {
        let target = self.shared.target.clone();
        hand_over(
            &self.host,
            &self.shared,
            &mut self.stop,
            &target,
            &event,
            Some(permit),
            None,
        )
        .await
    }
}

/// Puts `event` into `target`'s mailbox, holding it through refusals (retried with the
/// mailbox's hint or a doubling backoff), and counts the outcome. `reply`, if any, rides in
/// the message so the caller can wait for the turn. False when the host is gone or stopping.
async fn hand_over(
    host: &Weak<HostInner>,
    sh: &Shared,
    stop: &mut watch::Receiver<bool>,
    target: &ActorId,
    event: &Arc<Event>,
    window_permit: Option<OwnedSemaphorePermit>,
    reply: Option<Reply>,
) -> bool {
    let sender = event.source.as_deref().and_then(|s| ActorId::parse(s).ok());
    let mut slot = window_permit;
    let mut reply = reply;
    let mut backoff = MIN_BACKOFF;
    let mut warned = false;
    loop {
        let Some(host) = host.upgrade() else {
            return false;
        };
        if host.is_shutting_down() {
            return false;
        }
        let deadline = host.config.call_timeout().map(|d| Instant::now() + d);
        let mut make = || Message {
            msg_type: event.topic.to_string(),
            payload: event.payload.clone(),
            sender: sender.clone(),
            principal: event.principal.clone(),
            deadline,
            enqueued: Instant::now(),
            reply: reply.take(),
            permit: None,
            window_permit: slot.take(),
        };
        let res = host.deliver(target, false, &mut make);
        drop(host);
        match res {
            Ok(TellReceipt::DroppedNewest) => {
                sh.count_dropped();
                return true;
            }
            Ok(_) => {
                sh.delivered.fetch_add(1, Relaxed);
                sh.m_delivered.increment(1);
                return true;
            }
            Err(e) => {
                sh.retried.fetch_add(1, Relaxed);
                sh.m_retried.increment(1);
                if !warned {
                    warned = true;
                    tracing::warn!(target: "sluice.bus", actor = %target,
                        topic = %event.topic, error = %e,
                        "bus delivery refused; holding the event and retrying");
                }
                let wait = e
                    .retry_after_ms
                    .map(Duration::from_millis)
                    .unwrap_or(backoff)
                    .clamp(MIN_BACKOFF, MAX_BACKOFF);
                backoff = (backoff * 2).min(MAX_BACKOFF);
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = stop.changed() => return false,
                }
            }
        }
    }
}

/// A dispatch subscription: events leave the routed intake in DRR order into per-(actor
/// type, principal) dispatcher queues; each queue's consumer hands one event at a time to
/// the principal's own actor and waits for that turn to end before taking the next. A
/// refused hand-over (mailbox full, type not deployed) holds only that principal's queue.
/// A full queue drops the event (counted in `dropped` and
/// `sluice_bus_dispatch_dropped_total{reason="full"}`): waiting instead would let one slow
/// principal stall every other principal behind it in the intake.
async fn run_dispatch(
    host: Weak<HostInner>,
    shared: Arc<Shared>,
    config: DispatcherConfig,
    mut stop: watch::Receiver<bool>,
    mut rx: RoutedReceiver,
) {
    let actor_type: Arc<str> = Arc::from(shared.sub.actor_type.as_str());
    // The handler holds the subscription weakly: `Shared` holds the dispatcher (for stats),
    // and a strong handle back would be a cycle.
    let weak_shared = Arc::downgrade(&shared);
    let handler_host = host.clone();
    let handler_stop = stop.clone();
    let dispatcher = config.build(move |key: DispatchKey, event: Arc<Event>| {
        let host = handler_host.clone();
        let shared = weak_shared.upgrade();
        let mut stop = handler_stop.clone();
        async move {
            let Some(sh) = shared else { return };
            // The actor is keyed by the event's principal, also when the cap folded the
            // principal into the `system` queue.
            let target = match ActorId::new(&key.actor_type, &event.principal) {
                Ok(t) => t,
                Err(e) => {
                    sh.count_dropped();
                    tracing::warn!(target: "sluice.bus", actor_type = %key.actor_type,
                        error = %e, "principal is not a valid actor key; event dropped");
                    return;
                }
            };
            let (tx, done) = oneshot::channel();
            let reply = Reply {
                tx,
                started: Arc::new(AtomicBool::new(false)),
            };
            if !hand_over(&host, &sh, &mut stop, &target, &event, None, Some(reply)).await {
                return;
            }
            drop(sh);
            // The turn's end (or its message being displaced or skipped) releases the next
            // event of this principal. Its result is the actor's business.
            tokio::select! {
                _ = done => {}
                _ = stop.changed() => {}
            }
        }
    });
    let stats_of = dispatcher.clone();
    let _ = shared.dispatch.set(Box::new(move || {
        let s = stats_of.stats();
        DispatchStats {
            queues: s.queues,
            idle_evictions: s.idle_evictions,
            overflowed: s.overflowed,
            queued: s.queued,
            oldest_age_ms: s.oldest_published.map(|t| t.elapsed().as_millis() as u64),
        }
    }));
    loop {
        let event = tokio::select! {
            ev = rx.recv(None) => ev,
            _ = stop.changed() => break,
        };
        let Some(event) = event else { continue };
        if let Err(e) = dispatcher.dispatch(&actor_type, event) {
            drop(e.into_event());
            shared.count_dropped();
        }
    }
    dispatcher.close();
}
