//! The one seam for "where does this actor run". Every tell and ask a host makes — from the
//! Rust API, the ingress, a guest's turn, the outbox relay — leaves through a [`Route`]. The
//! default is this host's own activations ([`crate::Local`]); a cluster installs one that
//! sends to whichever host owns the actor and falls back to the local one for the rest, with
//! turns, mailboxes and flow control none the wiser.

use async_trait::async_trait;

use crate::call::{CallOptions, TellReceipt};
use crate::error::ActorError;
use crate::id::ActorId;

/// A message on its way to an actor: what it carries and how it is sent (deadline,
/// principal, sender, whether it is an arrival).
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// The message type.
    pub msg_type: String,
    /// The payload.
    pub payload: Vec<u8>,
    /// Deadline, principal, sender, call chain.
    pub opts: CallOptions,
}

/// Delivers tells and asks to actors wherever they run. Errors are the same typed errors a
/// local delivery gives (a full mailbox anywhere is `RESOURCE_EXHAUSTED: mailbox full
/// (retry_after_ms=N)`).
#[async_trait]
pub trait Route: Send + Sync + 'static {
    /// Fire and forget: the receipt says whether the message was queued, displaced the
    /// oldest, or was dropped by a `drop_newest` mailbox.
    async fn tell(&self, to: &ActorId, msg: Outgoing) -> Result<TellReceipt, ActorError>;
    /// Request/reply, bounded by the call's deadline.
    async fn ask(&self, to: &ActorId, msg: Outgoing) -> Result<Vec<u8>, ActorError>;

    /// Runs `here` — a delivery into this host's own mailbox of `to` — when `to` runs on this
    /// host (a cluster first claims it for this host when placement picks this host), and
    /// gives its result; `None`, without running `here`, when `to` runs on another host, where
    /// the caller sends it with [`Route::tell`] instead. For deliveries whose message carries
    /// host-side state a message to another host cannot (the bus's delivery-window permit and
    /// its turn-end signal). One host: always here.
    async fn deliver_here(
        &self,
        to: &ActorId,
        here: &mut (dyn FnMut() -> Result<TellReceipt, ActorError> + Send),
    ) -> Option<Result<TellReceipt, ActorError>> {
        let _ = to;
        Some(here())
    }
}
