//! An activation as the rest of the host sees it: its bounded mailbox (the offer that either
//! queues a message or refuses it with a typed, hinted error), its turn statistics and its
//! activation slot. The task that runs its turns is the supervisor's.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use sluice_flow::mailbox::{Mailbox, MailboxStrategy, Offer, ewma_micros, retry_after_ms};
use tokio::sync::Notify;

use super::actor_type::ActorType;
use super::slots::Slot;
use crate::call::TellReceipt;
use crate::clock::{coarse_now, since_origin};
use crate::error::{ActorError, ErrorCode, OverloadScope};
use crate::id::ActorId;
use crate::message::Message;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InboxState {
    Open,
    /// Deactivated: senders must look the actor up again (a fresh activation).
    Closed,
    /// The supervisor gave up: senders get `UNAVAILABLE` until the type is redeployed.
    Stopped,
}

pub(crate) struct Inbox {
    pub mb: Mailbox<Message>,
    pub state: InboxState,
    /// The actor's task holds a popped message (its turn is running or about to). Set by
    /// every `pop`, so admission's actor depth `mb.len() + running` is read under one lock.
    pub running: bool,
}

/// What the rest of the host holds of an activation.
pub(crate) struct ActorCell {
    pub id: ActorId,
    pub ty: Arc<ActorType>,
    pub inbox: Mutex<Inbox>,
    pub notify: Notify,
    /// Mean turn time, for the mailbox-full retry hint. Relaxed: a statistic.
    pub mean_turn_us: AtomicU64,
    /// Pending `schedule` timers.
    pub timers: AtomicUsize,
    /// Supervised instances are activated eagerly and never idle-deactivated.
    pub eager: bool,
    /// When its last turn started, as nanoseconds since the clock origin (LRU order).
    pub last_active: AtomicU64,
    /// An instance of this activation is alive (set once it is instantiated, cleared when it
    /// is dropped).
    pub live: Arc<AtomicBool>,
    /// The activation's counted slot under `max_activations`, taken when the cell was
    /// created and held until it ends (across crashes, restarts and deploys); taken away by
    /// an eviction (see `slots.rs`).
    pub slot: Mutex<Option<Slot>>,
}

/// Why an offer did not land in this cell.
pub(crate) enum OfferError {
    /// The cell was deactivated meanwhile; look it up again.
    Closed,
    Refused(ActorError),
}

impl ActorCell {
    pub fn new(
        id: ActorId,
        ty: Arc<ActorType>,
        capacity: usize,
        strategy: MailboxStrategy,
        eager: bool,
        slot: Slot,
    ) -> Self {
        Self {
            id,
            ty,
            inbox: Mutex::new(Inbox {
                mb: Mailbox::new(capacity, strategy),
                state: InboxState::Open,
                running: false,
            }),
            notify: Notify::new(),
            mean_turn_us: AtomicU64::new(0),
            timers: AtomicUsize::new(0),
            eager,
            last_active: AtomicU64::new(since_origin(Instant::now())),
            live: Arc::new(AtomicBool::new(false)),
            slot: Mutex::new(Some(slot)),
        }
    }

    /// Offers the message `make` builds. The message is only built once it will be queued
    /// (or displace another), so a refusal by a full `error` or `drop_newest` mailbox
    /// allocates nothing. `make` is called at most once.
    ///
    /// `cap` is the admission cap for this offer (0 = none; always 0 for calls from inside a
    /// chain): the offer is refused `OVERLOADED` when queued + running already reach it.
    pub fn offer(
        &self,
        make: &mut dyn FnMut() -> Message,
        cap: u64,
    ) -> Result<TellReceipt, OfferError> {
        let mut inbox = self.inbox.lock();
        match inbox.state {
            InboxState::Open => {}
            InboxState::Closed => return Err(OfferError::Closed),
            InboxState::Stopped => {
                return Err(OfferError::Refused(ActorError::unavailable(
                    "actor stopped by its supervisor (restart intensity exceeded)",
                )));
            }
        }
        if cap > 0 {
            let depth = inbox.mb.len() as u64 + u64::from(inbox.running);
            if depth >= cap {
                drop(inbox);
                return Err(OfferError::Refused(ActorError::overloaded(
                    OverloadScope::Actor,
                    depth,
                    cap,
                )));
            }
        }
        if inbox.mb.is_full() {
            match inbox.mb.strategy() {
                MailboxStrategy::Error => {
                    let depth = inbox.mb.len();
                    let running = inbox.running;
                    drop(inbox);
                    self.ty.metrics.refused.increment(1);
                    // The coarse clock (one atomic load, no syscall) keeps this path cheap;
                    // `last_active` is stamped when a turn starts.
                    let running_us = if running {
                        coarse_now().saturating_sub(self.last_active.load(Ordering::Relaxed)) / 1000
                    } else {
                        0
                    };
                    let hint = retry_after_ms(
                        depth,
                        self.mean_turn_us.load(Ordering::Relaxed),
                        running_us,
                    );
                    return Err(OfferError::Refused(ActorError::mailbox_full(hint)));
                }
                MailboxStrategy::DropNewest => {
                    drop(inbox);
                    self.ty.metrics.dropped_newest.increment(1);
                    return Ok(TellReceipt::DroppedNewest);
                }
                MailboxStrategy::DropOldest => {}
            }
        }
        let out = match inbox.mb.offer(make()) {
            Offer::Queued => TellReceipt::Queued,
            Offer::DisplacedOldest(old) => {
                self.ty.metrics.dropped_oldest.increment(1);
                drop(inbox);
                old.answer(Err(ActorError::new(
                    ErrorCode::ResourceExhausted,
                    "message dropped from a full mailbox (strategy=drop_oldest)",
                )));
                self.notify.notify_one();
                return Ok(TellReceipt::DisplacedOldest);
            }
            // Unreachable after the is_full check above; kept total for safety.
            Offer::DroppedNewest(_) => TellReceipt::DroppedNewest,
            Offer::Full(_) => return Err(OfferError::Refused(ActorError::mailbox_full(1))),
        };
        drop(inbox);
        self.notify.notify_one();
        Ok(out)
    }

    /// Messages queued and when the oldest of them arrived.
    pub fn queue(&self) -> (usize, Option<Instant>) {
        let inbox = self.inbox.lock();
        (inbox.mb.len(), inbox.mb.front().map(|m| m.enqueued))
    }

    /// The turn of `msg` starts at `now`: a caller timing out learns that it ran, and the
    /// message's queue time and the actor's last activity are recorded.
    pub fn turn_starts(&self, msg: &Message, now: Instant) {
        if let Some(r) = &msg.reply {
            r.started.store(true, Ordering::Release);
        }
        self.ty
            .metrics
            .queue_seconds
            .record(now.duration_since(msg.enqueued).as_secs_f64());
        self.last_active.store(since_origin(now), Ordering::Relaxed);
    }

    /// A turn that started at `started` ended with a reply (`ok`) or a returned error.
    pub fn turn_ended(&self, started: Instant, ok: bool) {
        let took = started.elapsed();
        let metrics = &self.ty.metrics;
        metrics.turn_seconds.record(took.as_secs_f64());
        let prev = self.mean_turn_us.load(Ordering::Relaxed);
        self.mean_turn_us.store(
            ewma_micros(prev, took.as_micros() as u64),
            Ordering::Relaxed,
        );
        if ok {
            metrics.turns_ok.increment(1);
        } else {
            metrics.turns_err.increment(1);
        }
    }

    /// Answers an expired message without running it: its caller has given up, and a turn
    /// would spend capacity on a reply nobody reads.
    pub fn skip(&self, msg: Message) {
        self.ty.metrics.turns_skipped.increment(1);
        msg.answer(Err(ActorError::deadline_exceeded(true)));
    }

    /// Whether a message is queued.
    pub fn has_queued(&self) -> bool {
        !self.inbox.lock().mb.is_empty()
    }

    /// Takes the next message, marking the actor as running it. Also ends the previous turn
    /// (if any) under the same lock, so a caller that got that turn's reply never finds it
    /// still counted: the actor is then `running` only for the message it took here.
    pub fn pop(&self) -> Option<Message> {
        let mut inbox = self.inbox.lock();
        let m = inbox.mb.pop();
        inbox.running = m.is_some();
        m
    }
}
