//! A message in a mailbox: what it carries, where its reply goes, and the capacity it holds
//! (admission depth, a bus delivery window) until it is dropped.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use tokio::sync::oneshot;

use crate::admission::HostPermit;
use crate::error::ActorError;
use crate::id::ActorId;

/// A reply slot for `ask`; `started` tells a timed-out caller whether its turn ever ran.
pub(crate) struct Reply {
    pub tx: oneshot::Sender<Result<Vec<u8>, ActorError>>,
    pub started: Arc<AtomicBool>,
}

/// A queued message.
pub(crate) struct Message {
    pub msg_type: String,
    pub payload: Vec<u8>,
    pub sender: Option<ActorId>,
    pub principal: Arc<str>,
    pub deadline: Option<Instant>,
    pub enqueued: Instant,
    /// The sender's span context; the turn's span is its child.
    pub trace: Option<sluice_trace::TraceParent>,
    pub reply: Option<Reply>,
    /// The message's slot in the host-wide admission depth (when that cap is on); released
    /// when the message is dropped — after its turn, a skip, a displacement or a stop.
    pub permit: Option<HostPermit>,
    /// A bus delivery's slot in its subscription's delivery window, released likewise.
    pub window_permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Message {
    /// Answers the caller (if it waits) and releases the message's capacity.
    pub fn answer(self, r: Result<Vec<u8>, ActorError>) {
        // Release the admission slot before the caller can observe the reply, so a caller
        // that got its answer never finds its own finished turn still counted.
        drop(self.permit);
        drop(self.window_permit);
        if let Some(reply) = self.reply {
            // The caller may have given up (timeout); that is not an error here.
            let _ = reply.tx.send(r);
        }
    }
}
