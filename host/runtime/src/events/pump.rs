//! The task that moves a subscription's events into its receiver's mailbox, at most
//! `delivery_window` at a time, holding each refused event and retrying it (the mailbox's hint,
//! or a backoff from 10 ms doubling to 1 s) so nothing is dropped silently.

use std::borrow::Cow;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use sluice_bus::{Event, EventReceiver, RoutedReceiver};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use super::stats::Shared;
use crate::call::{CallOptions, TellReceipt};
use crate::id::ActorId;
use crate::message::{Message, Reply};
use crate::routing::Routes;

/// Longest wait between two attempts to deliver one held event.
const MAX_BACKOFF: Duration = Duration::from_secs(1);
const MIN_BACKOFF: Duration = Duration::from_millis(10);

pub(crate) enum Source {
    Routed(RoutedReceiver),
    Broadcast(EventReceiver),
}

pub(crate) struct Pump {
    pub routes: Weak<Routes>,
    pub shared: Arc<Shared>,
    pub window: Arc<Semaphore>,
    pub stop: watch::Receiver<bool>,
}

impl Pump {
    pub async fn run(mut self, mut source: Source) {
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
            &self.routes,
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

/// The span of one event's hand-over to one subscriber, a child of the publisher's trace
/// context; the subscriber's turn is its child. A disabled span (no allocation) for an
/// untraced event or while traces are off. `outcome` and `retries` are recorded by
/// [`hand_over`].
fn deliver_span(event: &Event, target: &ActorId) -> tracing::Span {
    if event.trace.is_none() || !sluice_trace::enabled() {
        return tracing::Span::none();
    }
    let span = tracing::info_span!(
        "bus.deliver",
        topic = %event.topic,
        subscriber = %target,
        outcome = tracing::field::Empty,
        retries = tracing::field::Empty,
    );
    sluice_trace::set_parent(&span, event.trace);
    span
}

/// Writes a hand-over's end on its span (nothing while it is disabled).
fn record_delivery(span: &tracing::Span, outcome: &'static str, retries: u32) {
    if span.is_disabled() {
        return;
    }
    span.record("outcome", outcome);
    if retries > 0 {
        // i64: an OpenTelemetry integer (tracing-opentelemetry sends a u64 as text).
        span.record("retries", i64::from(retries));
    }
}

/// Puts `event` into `target`'s mailbox, holding it through refusals (retried with the
/// mailbox's hint or a doubling backoff), and counts the outcome. `reply`, if any, rides in
/// the message so the caller can wait for the turn. False when the host is gone or stopping.
/// A traced event's hand-over runs in a `bus.deliver` span ([`deliver_span`]) whose context
/// the message carries to the subscriber's turn.
///
/// In a cluster the subscriber may run on another host: the event then goes there through the
/// host's route as an internal tell (the publisher's principal and trace travel with it) and
/// counts as delivered once that host queued it. The delivery window's permit and `reply`
/// cannot cross hosts, so for a remote subscriber they end at that receipt: the window bounds
/// hand-overs in flight, and the remote mailbox's own bound is the backpressure.
pub(crate) async fn hand_over(
    routes: &Weak<Routes>,
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
    let span = deliver_span(event, target);
    let trace = sluice_trace::of(&span).or(event.trace);
    let mut retries = 0u32;
    loop {
        let Some(routes) = routes.upgrade() else {
            record_delivery(&span, "stopped", retries);
            return false;
        };
        let local = &routes.local;
        if local.env.is_shutting_down() {
            record_delivery(&span, "stopped", retries);
            return false;
        }
        let deadline = local.env.config.call_timeout().map(|d| Instant::now() + d);
        let mut make = || Message {
            msg_type: event.topic.to_string(),
            payload: event.payload.clone(),
            sender: sender.clone(),
            principal: event.principal.clone(),
            deadline,
            enqueued: Instant::now(),
            trace,
            reply: reply.take(),
            permit: None,
            window_permit: slot.take(),
        };
        let res = match routes.installed() {
            None => local.deliver(target, false, &mut make),
            Some(route) => {
                let mut here = || local.deliver(target, false, &mut make);
                match route.deliver_here(target, &mut here).await {
                    Some(res) => res,
                    None => {
                        let opts = CallOptions {
                            deadline,
                            principal: Some(event.principal.clone()),
                            sender: sender.clone(),
                            internal: true,
                            trace,
                        };
                        let topic = Cow::Borrowed(&*event.topic);
                        let sent = routes
                            .tell(target, topic, event.payload.clone(), opts)
                            .await;
                        if sent.is_ok() {
                            // Queued on the subscriber's host: this host's part is done.
                            slot = None;
                            reply = None;
                        }
                        sent
                    }
                }
            }
        };
        drop(routes);
        match res {
            Ok(TellReceipt::DroppedNewest) => {
                sh.count_dropped();
                record_delivery(&span, "dropped", retries);
                return true;
            }
            Ok(_) => {
                sh.delivered.fetch_add(1, Relaxed);
                sh.m_delivered.increment(1);
                record_delivery(&span, "delivered", retries);
                return true;
            }
            Err(e) => {
                retries = retries.saturating_add(1);
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
                    _ = stop.changed() => {
                        record_delivery(&span, "stopped", retries);
                        return false;
                    }
                }
            }
        }
    }
}
