//! Dispatcher queues: one bounded FIFO and one consumer task per (actor type, principal).
//!
//! Events for one (actor type, principal) are handled one at a time in
//! arrival order (chained handlers see FIFO), while distinct principals are
//! handled concurrently by distinct tasks. Each queue holds at most
//! [`DispatcherConfig::queue_capacity`] events (default 64); a full queue
//! refuses with the event given back, never blocks the caller.
//!
//! # Idle eviction without losing an event
//! A consumer that has seen nothing for [`DispatcherConfig::idle_grace`]
//! (default 60 s) removes its own queue. Every send happens inside the
//! dispatcher's lock, and the consumer decides to leave inside the same lock
//! after `try_recv` finds the queue empty. So either a send completed before
//! the consumer took the lock (and `try_recv` sees it: the consumer keeps
//! going), or it comes after the queue left the map (and the send spawns a
//! fresh consumer). There is no window in which an accepted event sits in a
//! queue nobody reads. (The seed instead relied on `sender_strong_count`,
//! which needed senders cloned out of the lock.)
//!
//! # Bounded map
//! At most [`DispatcherConfig::max_queues_per_actor_type`] queues (default
//! 10,000) exist per actor type; beyond that, new principals share the actor
//! type's [`SYSTEM_PRINCIPAL`] queue, and an audit line is logged.
//!
//! # Handlers must not panic
//! A handler that panics ends its consumer task: the events queued behind it
//! in that one queue are lost (counted nowhere), and the next dispatch for the
//! key finds the queue closed and replaces it. The runtime's handler turns
//! actor traps into errors, so this is a bug path, not a policy.
//!
//! The lock is one `parking_lot::Mutex` held for a map lookup and a
//! `try_send` (no await, no allocation on the hit path); shard it by key hash
//! if profiles ever show it.

mod consumer;
mod error;

pub use error::DispatchError;

use crate::metrics::{DISPATCH_DROPPED_TOTAL, DISPATCHER_OVERFLOW_TOTAL, DISPATCHER_QUEUES};
use crate::{Event, SYSTEM_PRINCIPAL};
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{self, error::TrySendError};

/// Default capacity of one (actor type, principal) queue.
pub const DEFAULT_QUEUE_CAPACITY: usize = 64;
/// Default idle time after which a consumer removes its queue.
pub const DEFAULT_IDLE_GRACE: Duration = Duration::from_secs(60);
/// Default cap on queues per actor type.
pub const DEFAULT_MAX_QUEUES_PER_ACTOR_TYPE: usize = 10_000;

/// Dispatcher bounds; `Default` gives the seed's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatcherConfig {
    /// Events one queue holds (default [`DEFAULT_QUEUE_CAPACITY`]; at least 1).
    pub queue_capacity: usize,
    /// Idle time before a consumer leaves (default [`DEFAULT_IDLE_GRACE`]).
    pub idle_grace: Duration,
    /// Queues per actor type (default [`DEFAULT_MAX_QUEUES_PER_ACTOR_TYPE`]).
    pub max_queues_per_actor_type: usize,
}

impl Default for DispatcherConfig {
    fn default() -> Self {
        Self {
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            idle_grace: DEFAULT_IDLE_GRACE,
            max_queues_per_actor_type: DEFAULT_MAX_QUEUES_PER_ACTOR_TYPE,
        }
    }
}

impl DispatcherConfig {
    /// Builds a dispatcher that hands events to `handler`. Must be called
    /// (and dispatched to) inside a tokio runtime.
    pub fn build<H: Handler>(self, handler: H) -> Dispatcher<H> {
        Dispatcher {
            inner: Arc::new(Inner {
                handler,
                config: Self {
                    queue_capacity: self.queue_capacity.max(1),
                    ..self
                },
                state: Mutex::new(State::default()),
                next_generation: AtomicU64::new(0),
                overflow_logged: AtomicU64::new(0),
                warned_full: AtomicBool::new(false),
                idle_evictions: AtomicU64::new(0),
                late_sends: AtomicU64::new(0),
                dropped_full: AtomicU64::new(0),
            }),
        }
    }
}

/// Which queue an event goes to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DispatchKey {
    /// The receiving actor type.
    pub actor_type: Arc<str>,
    /// The publishing principal (or [`SYSTEM_PRINCIPAL`] after overflow).
    pub principal: Arc<str>,
}

/// What the consumer runs for each event; the runtime passes one that runs an
/// actor turn. Implemented for every `Fn(DispatchKey, Arc<Event>) -> impl Future<Output = ()>`.
pub trait Handler: Send + Sync + 'static {
    /// Handles one event. Returning ends the event; the next one for the same
    /// key starts only then.
    fn handle(&self, key: DispatchKey, event: Arc<Event>) -> impl Future<Output = ()> + Send;
}

impl<F, Fut> Handler for F
where
    F: Fn(DispatchKey, Arc<Event>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    fn handle(&self, key: DispatchKey, event: Arc<Event>) -> impl Future<Output = ()> + Send {
        self(key, event)
    }
}

struct Slot {
    tx: mpsc::Sender<Arc<Event>>,
    generation: u64,
    waiting: Waiting,
}

/// Publish times of the events in one queue, oldest first, for its age: pushed before the
/// send (under the dispatcher's lock, so senders are serialised) and popped by the consumer
/// as it takes each event. `mpsc` cannot be peeked.
pub(super) type Waiting = Arc<Mutex<VecDeque<Instant>>>;

#[derive(Default)]
struct State {
    slots: HashMap<DispatchKey, Slot>,
    per_type: HashMap<Arc<str>, usize>,
}

impl State {
    fn remove(&mut self, key: &DispatchKey) {
        if self.slots.remove(key).is_some() {
            if let Some(n) = self.per_type.get_mut(&key.actor_type) {
                *n -= 1;
                if *n == 0 {
                    self.per_type.remove(&key.actor_type);
                }
            }
            metrics::gauge!(DISPATCHER_QUEUES).decrement(1.0);
        }
    }
}

struct Inner<H> {
    handler: H,
    config: DispatcherConfig,
    state: Mutex<State>,
    next_generation: AtomicU64,
    overflow_logged: AtomicU64,
    warned_full: AtomicBool,
    /// Consumers that removed their idle queue.
    idle_evictions: AtomicU64,
    /// Times a consumer's idle timer fired but a send had arrived first, so
    /// it kept serving (the eviction race, resolved in the event's favour).
    late_sends: AtomicU64,
    /// Dispatches refused because the queue was full.
    dropped_full: AtomicU64,
}

/// Counters of a [`Dispatcher`] since creation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DispatcherStats {
    /// Live queues.
    pub queues: usize,
    /// Idle queues removed by their consumer.
    pub idle_evictions: u64,
    /// Idle timers that fired after a send had already arrived.
    pub late_sends: u64,
    /// Principals folded into their actor type's `system` queue by the queue cap.
    pub overflowed: u64,
    /// Dispatches refused because their queue was full.
    pub refused_full: u64,
    /// Events waiting in all queues (not yet taken by their consumer).
    pub queued: usize,
    /// When the oldest waiting event was published, if any waits.
    pub oldest_published: Option<Instant>,
}

/// Per-(actor type, principal) queues with self-evicting consumer tasks.
/// Cheap to clone.
pub struct Dispatcher<H> {
    inner: Arc<Inner<H>>,
}

impl<H> Clone for Dispatcher<H> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<H> std::fmt::Debug for Dispatcher<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("queues", &self.inner.state.lock().slots.len())
            .finish()
    }
}

/// Sends into `slot`, recording the event's publish time first (and taking it back if the
/// queue refuses), so the consumer always finds the time of the event it takes at the front.
fn send(
    slot: &Slot,
    event: Arc<Event>,
    published: Instant,
) -> Result<(), TrySendError<Arc<Event>>> {
    slot.waiting.lock().push_back(published);
    slot.tx.try_send(event).inspect_err(|_| {
        slot.waiting.lock().pop_back();
    })
}

impl<H: Handler> Dispatcher<H> {
    /// Queues `event` for `actor_type` under the event's principal, spawning
    /// the queue's consumer if it has none. Never waits. Must run inside a
    /// tokio runtime context (it may `tokio::spawn`).
    pub fn dispatch(&self, actor_type: &Arc<str>, event: Arc<Event>) -> Result<(), DispatchError> {
        let mut key = DispatchKey {
            actor_type: Arc::clone(actor_type),
            principal: Arc::clone(&event.principal),
        };
        let mut state = self.inner.state.lock();
        if !state.slots.contains_key(&key) {
            let count = state.per_type.get(actor_type).copied().unwrap_or(0);
            if count >= self.inner.config.max_queues_per_actor_type
                && &*key.principal != SYSTEM_PRINCIPAL
            {
                self.on_overflow(&key);
                key.principal = Arc::from(SYSTEM_PRINCIPAL);
            }
        }
        let published = event.published_at.unwrap_or_else(Instant::now);
        let event = match state.slots.get(&key) {
            Some(slot) => match send(slot, event, published) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Full(event)) => {
                    drop(state);
                    return Err(self.on_full(&key, event));
                }
                // The consumer is gone without removing its slot (its handler
                // panicked): replace the queue.
                Err(TrySendError::Closed(event)) => {
                    state.remove(&key);
                    event
                }
            },
            None => event,
        };
        let (tx, rx) = mpsc::channel(self.inner.config.queue_capacity);
        // Relaxed: the generation only has to be unique.
        let generation = self.inner.next_generation.fetch_add(1, Ordering::Relaxed);
        let slot = Slot {
            tx,
            generation,
            waiting: Waiting::default(),
        };
        send(&slot, event, published).expect("a new queue has room");
        let waiting = Arc::clone(&slot.waiting);
        state.slots.insert(key.clone(), slot);
        *state
            .per_type
            .entry(Arc::clone(&key.actor_type))
            .or_default() += 1;
        drop(state);
        metrics::gauge!(DISPATCHER_QUEUES).increment(1.0);
        tokio::spawn(consumer::run(
            Arc::clone(&self.inner),
            key,
            generation,
            rx,
            waiting,
        ));
        Ok(())
    }

    /// Feeds a routed subscription into this dispatcher for `actor_type`: a
    /// task that takes events in DRR order and dispatches each one. An event
    /// refused because its (actor type, principal) queue is full is dropped
    /// (counted and logged by [`dispatch`](Self::dispatch)); waiting instead
    /// would let one slow principal block every other one behind it. Abort
    /// the returned handle to stop the pump; dropping it does not.
    pub fn spawn_pump(
        &self,
        actor_type: Arc<str>,
        mut subscription: crate::RoutedReceiver,
    ) -> tokio::task::JoinHandle<()> {
        let dispatcher = self.clone();
        tokio::spawn(async move {
            while let Some(event) = subscription.recv(None).await {
                // Refusals are already counted and logged by `dispatch`.
                let _ = dispatcher.dispatch(&actor_type, event);
            }
        })
    }

    fn on_overflow(&self, key: &DispatchKey) {
        metrics::counter!(DISPATCHER_OVERFLOW_TOTAL).increment(1);
        // Relaxed: a log-throttling counter.
        let n = self.inner.overflow_logged.fetch_add(1, Ordering::Relaxed);
        if n.is_multiple_of(1000) {
            tracing::warn!(target: "sluice.audit.bus", security_event = true,
                actor_type = %key.actor_type, principal = %key.principal,
                limit = self.inner.config.max_queues_per_actor_type, overflowed_so_far = n + 1,
                "dispatcher queue cap reached; principal shares the system queue");
        }
    }

    fn on_full(&self, key: &DispatchKey, event: Arc<Event>) -> DispatchError {
        metrics::counter!(DISPATCH_DROPPED_TOTAL, "reason" => "full").increment(1);
        self.inner.dropped_full.fetch_add(1, Ordering::Relaxed);
        if !self.inner.warned_full.swap(true, Ordering::Relaxed) {
            tracing::warn!(target: "sluice.bus", actor_type = %key.actor_type,
                principal = %key.principal, "dispatcher queue full; refusing events");
        }
        DispatchError::QueueFull(event)
    }

    /// Removes every queue. Each consumer still handles the events already in its queue,
    /// then ends (its sender is gone) instead of waiting out its idle grace; a later
    /// dispatch starts fresh queues. For shutdown.
    pub fn close(&self) {
        let mut state = self.inner.state.lock();
        let n = state.slots.len();
        state.slots.clear();
        state.per_type.clear();
        drop(state);
        metrics::gauge!(DISPATCHER_QUEUES).decrement(n as f64);
    }

    /// Queue count, waiting events and their age, eviction counters.
    pub fn stats(&self) -> DispatcherStats {
        let (mut queues, mut queued, mut oldest) = (0, 0, None::<Instant>);
        {
            let state = self.inner.state.lock();
            for slot in state.slots.values() {
                queues += 1;
                // A queue whose consumer is gone (its handler panicked) is replaced by the
                // next dispatch; what it held is lost, not waiting.
                if slot.tx.is_closed() {
                    continue;
                }
                // Both from the same snapshot: an event its consumer is taking right now still
                // counts for a moment, in depth and age alike.
                let waiting = slot.waiting.lock();
                queued += waiting.len();
                if let Some(&t) = waiting.front() {
                    oldest = Some(oldest.map_or(t, |o: Instant| o.min(t)));
                }
            }
        }
        // Relaxed: independent statistics counters.
        DispatcherStats {
            queues,
            queued,
            oldest_published: oldest,
            idle_evictions: self.inner.idle_evictions.load(Ordering::Relaxed),
            late_sends: self.inner.late_sends.load(Ordering::Relaxed),
            overflowed: self.inner.overflow_logged.load(Ordering::Relaxed),
            refused_full: self.inner.dropped_full.load(Ordering::Relaxed),
        }
    }

    /// Live queues (each with one consumer task).
    pub fn queue_count(&self) -> usize {
        self.inner.state.lock().slots.len()
    }

    /// Live queues of one actor type.
    pub fn queue_count_for(&self, actor_type: &str) -> usize {
        self.inner
            .state
            .lock()
            .per_type
            .get(actor_type)
            .copied()
            .unwrap_or(0)
    }

    /// Events waiting in the (actor type, principal) queue, not counting one
    /// being handled; `None` if the queue does not exist.
    pub fn queue_depth(&self, actor_type: &str, principal: &str) -> Option<usize> {
        let key = DispatchKey {
            actor_type: actor_type.into(),
            principal: principal.into(),
        };
        let state = self.inner.state.lock();
        let tx = &state.slots.get(&key)?.tx;
        Some(tx.max_capacity() - tx.capacity())
    }

    /// Whether a queue exists for the key.
    pub fn has_queue(&self, actor_type: &str, principal: &str) -> bool {
        let key = DispatchKey {
            actor_type: actor_type.into(),
            principal: principal.into(),
        };
        self.inner.state.lock().slots.contains_key(&key)
    }
}
