//! This host's own activations as a [`Route`]: a tell or ask finds (or activates) the actor's
//! cell and offers the message to its mailbox, behind the gates in front of it — payload
//! size, deadline (resolved once, the message's enqueue time) and the admission caps for
//! arrivals. A new key takes its activation slot here, before anything is queued.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use async_trait::async_trait;
use sluice_flow::deadline;
use tokio::sync::oneshot;

use crate::actor::cell::{ActorCell, OfferError};
use crate::actor::env::Env;
use crate::actor::eviction;
use crate::actor::registry::{Registry, TypeEntry};
use crate::actor::supervisor;
use crate::admission::Admission;
use crate::call::{CallOptions, TellReceipt};
use crate::error::{ActorError, ErrorCode};
use crate::id::{ActorId, validate_msg_type};
use crate::message::{Message, Reply};
use crate::route::{Outgoing, Route};

/// The local route: this host's registry of actor types and their activations.
pub(crate) struct Local {
    pub env: Arc<Env>,
    pub registry: Registry,
    pub admission: Admission,
    /// The principal of calls made on no one's behalf.
    pub system: Arc<str>,
}

impl Local {
    fn check_payload(&self, len: usize) -> Result<(), ActorError> {
        let max = self.env.config.max_payload_bytes;
        if len > max {
            return Err(ActorError::invalid_argument(format!(
                "payload of {len} bytes exceeds max_payload_bytes={max}"
            )));
        }
        Ok(())
    }

    /// The call's deadline: inherited inside a chain, else the caller's own or the default.
    /// A deadline that has already passed fails the call before anything is queued. Returned
    /// with the instant it was resolved at, the message's enqueue time (one clock read).
    fn resolve_deadline(
        &self,
        opts: &CallOptions,
        to: &ActorId,
    ) -> Result<(Option<Instant>, Instant), ActorError> {
        let now = Instant::now();
        let d = deadline::resolve(
            opts.deadline,
            opts.internal,
            now,
            self.env.config.call_timeout(),
        );
        if deadline::expired(d, now) {
            self.count_deadline_exceeded(to, true);
            return Err(ActorError::deadline_exceeded(true));
        }
        Ok((d, now))
    }

    fn count_deadline_exceeded(&self, to: &ActorId, skipped: bool) {
        if let Some(t) = self.registry.get(to.actor_type()) {
            if skipped {
                t.ty.metrics.deadline_skipped.increment(1);
            } else {
                t.ty.metrics.deadline_running.increment(1);
            }
        }
    }

    /// Finds (or activates) the cell for `id` and offers the message `make` builds, looking
    /// again when a concurrent deactivation closed the cell it found. An `arrival` (empty call
    /// chain) passes the admission caps first; with every cap off that is one branch.
    pub fn deliver(
        &self,
        id: &ActorId,
        arrival: bool,
        make: &mut dyn FnMut() -> Message,
    ) -> Result<TellReceipt, ActorError> {
        let Some(entry) = self.registry.get(id.actor_type()) else {
            return Err(ActorError::not_found("no such actor type on this host"));
        };
        if self.env.is_shutting_down() {
            return Err(ActorError::unavailable("host is shutting down"));
        }
        let (cap, mut permit) = if self.admission.enabled() {
            let cap = if arrival {
                entry.ty.max_queued.load(Ordering::Relaxed)
            } else {
                0
            };
            (cap, self.admission.admit_host(arrival)?)
        } else {
            (0, None)
        };
        // The permit moves into the message only if it is queued; a refusal drops it here.
        let mut make = || {
            let mut m = make();
            m.permit = permit.take();
            m
        };
        loop {
            let cell = self.cell(&entry, id, false)?;
            match cell.offer(&mut make, cap) {
                Ok(r) => return Ok(r),
                Err(OfferError::Refused(e)) => {
                    if e.code == ErrorCode::Overloaded {
                        self.admission.count_actor_refusal();
                    }
                    return Err(e);
                }
                Err(OfferError::Closed) => continue,
            }
        }
    }

    /// The live cell for `id`, activating it (spawning its supervisor) when there is none.
    /// A new cell takes its activation slot first, so a key that cannot be activated is
    /// refused here (`RESOURCE_EXHAUSTED` with a retry hint) before anything is queued.
    pub fn cell(
        &self,
        entry: &Arc<TypeEntry>,
        id: &ActorId,
        eager: bool,
    ) -> Result<Arc<ActorCell>, ActorError> {
        if let Some(c) = entry.get(id.key()) {
            return Ok(c);
        }
        // A cluster's single-activation rule first: a refused key takes no slot. Supervised
        // instances pass it too when the hooks place them (and a message that activates one
        // makes it the supervised instance it is).
        let hooks = self.env.activations();
        let placed = hooks.is_some_and(|h| h.places_supervised());
        let eager = eager || (placed && entry.ty.current().spec.is_eager_key(id.key()));
        let hooks = hooks.filter(|_| !eager || placed);
        if let Some(h) = hooks {
            h.admit(id)?;
        }
        let undo = || {
            if let Some(h) = hooks {
                h.ended(id);
            }
        };
        // Not under the cell map's lock: making room may close an idle cell of this type.
        let slot = eviction::reserve(
            &self.registry,
            &self.env.slots,
            self.env.config.max_activations,
            entry,
            id,
        )
        .inspect_err(|_| undo())?;
        let module = entry.ty.current();
        let cell = Arc::new(ActorCell::new(
            id.clone(),
            entry.ty.clone(),
            module.spec.mailbox_capacity,
            module.strategy,
            eager,
            slot,
        ));
        // Another sender may have created it meanwhile: then ours (and its slot) goes back.
        let cell = match entry.insert_new(cell) {
            Ok(cell) => cell,
            Err(theirs) => {
                undo();
                return Ok(theirs);
            }
        };
        tokio::spawn(supervisor::run(
            cell.clone(),
            entry.clone(),
            self.env.clone(),
        ));
        Ok(cell)
    }

    pub fn message(
        &self,
        msg_type: String,
        payload: Vec<u8>,
        opts: &CallOptions,
        deadline: Option<Instant>,
        enqueued: Instant,
    ) -> Message {
        Message {
            msg_type,
            payload,
            sender: opts.sender.clone(),
            principal: opts
                .principal
                .clone()
                .unwrap_or_else(|| self.system.clone()),
            deadline,
            enqueued,
            trace: opts.trace,
            reply: None,
            permit: None,
            window_permit: None,
        }
    }

    /// Fire and forget. A refusal by a full mailbox allocates nothing and reads no clock
    /// (only an explicit deadline can have passed already).
    pub fn tell(
        &self,
        id: &ActorId,
        msg_type: Cow<'_, str>,
        payload: Vec<u8>,
        opts: &CallOptions,
    ) -> Result<TellReceipt, ActorError> {
        validate_msg_type(&msg_type)?;
        self.check_payload(payload.len())?;
        let stamped = match opts.deadline {
            Some(_) => Some(self.resolve_deadline(opts, id)?),
            None => None,
        };
        let mut parts = Some((msg_type, payload));
        self.deliver(id, !opts.internal, &mut || {
            let (t, p) = parts.take().expect("a message is built at most once");
            let (deadline, now) = stamped.unwrap_or_else(|| {
                let now = Instant::now();
                let d = deadline::resolve(None, opts.internal, now, self.env.config.call_timeout());
                (d, now)
            });
            self.message(t.into_owned(), p, opts, deadline, now)
        })
    }

    /// Request/reply, bounded by the call's deadline.
    pub async fn ask(
        &self,
        id: &ActorId,
        msg_type: String,
        payload: Vec<u8>,
        opts: &CallOptions,
    ) -> Result<Vec<u8>, ActorError> {
        let pending = self.offer_ask(id, msg_type, payload, opts)?;
        self.reply_of(id, pending).await
    }

    /// The first half of an ask: checks it and queues it, without waiting. The message is in
    /// the mailbox when this returns `Ok`, so asks offered one after another keep that order.
    pub fn offer_ask(
        &self,
        id: &ActorId,
        msg_type: String,
        payload: Vec<u8>,
        opts: &CallOptions,
    ) -> Result<PendingReply, ActorError> {
        validate_msg_type(&msg_type)?;
        self.check_payload(payload.len())?;
        if opts.sender.as_ref() == Some(id) {
            return Err(ActorError::invalid_argument(
                "an actor cannot ask itself: its turn would wait on itself",
            ));
        }
        let (deadline, now) = self.resolve_deadline(opts, id)?;
        let (tx, rx) = oneshot::channel();
        let started = Arc::new(AtomicBool::new(false));
        let mut parts = Some((msg_type, payload, tx));
        let receipt = self.deliver(id, !opts.internal, &mut || {
            let (t, p, tx) = parts.take().expect("a message is built at most once");
            let mut m = self.message(t, p, opts, deadline, now);
            m.reply = Some(Reply {
                tx,
                started: started.clone(),
            });
            m
        })?;
        if receipt == TellReceipt::DroppedNewest {
            return Err(ActorError::new(
                ErrorCode::ResourceExhausted,
                "message dropped by a full mailbox (strategy=drop_newest)",
            ));
        }
        Ok(PendingReply {
            rx,
            deadline,
            started,
        })
    }

    /// The second half of an ask: its reply, or `DEADLINE_EXCEEDED` (with `skipped` when
    /// its turn never started) once its deadline passes.
    pub async fn reply_of(
        &self,
        id: &ActorId,
        pending: PendingReply,
    ) -> Result<Vec<u8>, ActorError> {
        let PendingReply {
            rx,
            deadline,
            started,
        } = pending;
        let replied = match deadline {
            Some(d) => match tokio::time::timeout_at(d.into(), rx).await {
                Ok(r) => r,
                Err(_) => {
                    // Acquire pairs with the Release store when the turn starts.
                    let skipped = !started.load(Ordering::Acquire);
                    self.count_deadline_exceeded(id, skipped);
                    return Err(ActorError::deadline_exceeded(skipped));
                }
            },
            None => rx.await,
        };
        replied.unwrap_or_else(|_| Err(ActorError::unavailable("the actor ended before replying")))
    }
}

/// An ask queued by [`Local::offer_ask`], waiting for its turn's reply.
pub(crate) struct PendingReply {
    rx: oneshot::Receiver<Result<Vec<u8>, ActorError>>,
    deadline: Option<Instant>,
    started: Arc<AtomicBool>,
}

#[async_trait]
impl Route for Local {
    async fn tell(&self, to: &ActorId, m: Outgoing) -> Result<TellReceipt, ActorError> {
        Local::tell(self, to, m.msg_type.into(), m.payload, &m.opts)
    }

    async fn ask(&self, to: &ActorId, m: Outgoing) -> Result<Vec<u8>, ActorError> {
        Local::ask(self, to, m.msg_type, m.payload, &m.opts).await
    }
}
