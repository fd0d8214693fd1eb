//! A dispatch subscription: one actor per principal (`Type/{principal}`), each principal's
//! events handled one at a time in publish order while distinct principals run concurrently.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Weak};

use sluice_bus::{DispatchKey, DispatcherConfig, Event, RoutedReceiver};
use tokio::sync::{oneshot, watch};

use super::pump::hand_over;
use super::stats::{DispatchStats, Shared};
use crate::id::ActorId;
use crate::message::Reply;
use crate::routing::Routes;

/// A dispatch subscription: events leave the routed intake in DRR order into per-(actor
/// type, principal) dispatcher queues; each queue's consumer hands one event at a time to
/// the principal's own actor and waits for that turn to end before taking the next. A
/// refused hand-over (mailbox full, type not deployed) holds only that principal's queue.
/// A full queue drops the event (counted in `dropped` and
/// `sluice_bus_dispatch_dropped_total{reason="full"}`): waiting instead would let one slow
/// principal stall every other principal behind it in the intake.
pub(crate) async fn run_dispatch(
    routes: Weak<Routes>,
    shared: Arc<Shared>,
    config: DispatcherConfig,
    mut stop: watch::Receiver<bool>,
    mut rx: RoutedReceiver,
) {
    let actor_type: Arc<str> = Arc::from(shared.sub.actor_type.as_str());
    // The handler holds the subscription weakly: `Shared` holds the dispatcher (for stats),
    // and a strong handle back would be a cycle.
    let weak_shared = Arc::downgrade(&shared);
    let handler_routes = routes.clone();
    let handler_stop = stop.clone();
    let dispatcher = config.build(move |key: DispatchKey, event: Arc<Event>| {
        let routes = handler_routes.clone();
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
            if !hand_over(&routes, &sh, &mut stop, &target, &event, None, Some(reply)).await {
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
