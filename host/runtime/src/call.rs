//! How a call is made (its options) and what became of it (receipts): the vocabulary shared
//! by every caller — the Rust API, guest imports, the relay, the bus — and every route.

use std::sync::Arc;
use std::time::Instant;

use sluice_flow::deadline;
use sluice_trace::TraceParent;

use crate::error::ActorError;
use crate::id::ActorId;

/// How a call is made: its deadline, on whose behalf, from whom.
#[derive(Clone, Debug, Default)]
pub struct CallOptions {
    /// Absolute deadline; `None` = the host's `call_timeout_ms` for external calls.
    pub deadline: Option<Instant>,
    /// Who the work is for; `None` = `system`.
    pub principal: Option<Arc<str>>,
    /// The calling actor, if any.
    pub sender: Option<ActorId>,
    /// True when made from inside a turn (non-empty call chain): never refused by admission
    /// caps, and the deadline is inherited rather than defaulted.
    pub internal: bool,
    /// The caller's span context (W3C `traceparent`): the receiving turn's span becomes its
    /// child. `None` when traces are off (see [`sluice_trace::enabled`]).
    pub trace: Option<TraceParent>,
}

impl CallOptions {
    /// Gives the call a budget of `ms` milliseconds from now: the earlier of that and the
    /// deadline already set (so it never extends an inherited one). `ms` must be a positive
    /// finite number, else `INVALID_ARGUMENT`.
    pub fn with_deadline_ms(mut self, ms: f64) -> Result<Self, ActorError> {
        let budget = deadline::budget_from_ms(ms)
            .map_err(|e| ActorError::invalid_argument(e.to_string()))?;
        self.deadline = Some(deadline::tighten(self.deadline, Instant::now(), budget));
        Ok(self)
    }
}

/// What became of a `tell`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TellReceipt {
    /// Queued, nothing dropped.
    Queued,
    /// Queued after the mailbox's `drop_oldest` strategy discarded the oldest message.
    DisplacedOldest,
    /// The mailbox's `drop_newest` strategy discarded this message.
    DroppedNewest,
}

/// How `tell_reliable` delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryPath {
    /// Straight into the receiver's mailbox.
    Direct,
    /// Stored in the outbox; the relay delivers it.
    Outbox,
}
