//! The consumer task of one dispatcher queue.

use super::{DispatchKey, Handler, Inner, Waiting};
use crate::Event;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use tokio::sync::mpsc;

/// Handles events in order until the queue has been idle for the grace
/// period, then removes the queue — only if it is still empty while holding
/// the dispatcher lock that every send takes (see the module docs).
pub(super) async fn run<H: Handler>(
    inner: Arc<Inner<H>>,
    key: DispatchKey,
    generation: u64,
    mut rx: mpsc::Receiver<Arc<Event>>,
    waiting: Waiting,
) {
    let grace = inner.config.idle_grace;
    loop {
        let event = match tokio::time::timeout(grace, rx.recv()).await {
            Ok(Some(event)) => event,
            // Every sender is gone: our slot was already replaced or removed.
            Ok(None) => return,
            Err(_idle) => {
                let mut state = inner.state.lock();
                match rx.try_recv() {
                    // A send won the race against our timer: keep serving.
                    Ok(event) => {
                        drop(state);
                        inner.late_sends.fetch_add(1, Relaxed);
                        event
                    }
                    Err(_) => {
                        if state
                            .slots
                            .get(&key)
                            .is_some_and(|s| s.generation == generation)
                        {
                            state.remove(&key);
                        }
                        inner.idle_evictions.fetch_add(1, Relaxed);
                        tracing::trace!(target: "sluice.bus", actor_type = %key.actor_type,
                            principal = %key.principal, "idle dispatcher queue evicted");
                        return;
                    }
                }
            }
        };
        waiting.lock().pop_front();
        inner.handler.handle(key.clone(), event).await;
    }
}
