//! The delivery contract between the outbox and whoever owns the receivers (the runtime): a
//! typed [`Envelope`] in, a typed [`DeliveryError`] out. Nothing crosses as text to be parsed.

use std::fmt;
use std::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;
use serde::Deserialize;
use sluice_trace::TraceParent;

/// How a message counts as delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DispatchMode {
    /// Delivered once it is in the receiver's mailbox.
    #[default]
    Cast,
    /// Delivered once the receiver's handler returned success; a handler error is retried and,
    /// after `max_attempts`, dead-lettered.
    Call,
}

impl DispatchMode {
    /// The stored spelling (`cast`, `call`).
    pub fn as_str(self) -> &'static str {
        match self {
            DispatchMode::Cast => "cast",
            DispatchMode::Call => "call",
        }
    }

    /// The stored spelling back; `None` for anything this crate never writes.
    pub fn from_stored(s: &str) -> Option<Self> {
        match s {
            "cast" => Some(DispatchMode::Cast),
            "call" => Some(DispatchMode::Call),
            _ => None,
        }
    }
}

impl TryFrom<String> for DispatchMode {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Self::from_stored(&s).ok_or_else(|| format!("unknown dispatch mode {s:?} in the store"))
    }
}

/// One delivery attempt as the relay, or `dispatch`'s immediate attempt, hands it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// Row id in the store (for logs; ids grow with enqueue order).
    pub id: i64,
    /// Receiving actor id, `Type/key`.
    pub receiver: String,
    /// Sending actor id; empty when the host itself stored it.
    pub sender: String,
    /// Message type.
    pub msg_type: String,
    /// Payload, shared with the store's copy (no copy per target or per attempt).
    pub payload: Bytes,
    /// How the message counts as delivered.
    pub mode: DispatchMode,
    /// Who the work is for; `None` = the host (`system`).
    pub principal: Option<String>,
    /// When the attempt must give up. `dispatch` passes the calling turn's deadline, so a
    /// [`DispatchMode::Call`] attempt waits no longer than the turn may; the relay passes
    /// `None` (the receiver's host applies its own call timeout). A cast is delivered once it
    /// is queued, so it must not carry this deadline into the mailbox (it would be skipped
    /// after the outbox acked it).
    pub deadline: Option<Instant>,
    /// 1 for the first attempt, 2 for the first retry, …
    pub attempt: u32,
    /// The trace context stored with the message (the sender's `dispatch` span); the
    /// attempt's span is its child. `None` when traces are off.
    pub trace: Option<TraceParent>,
}

/// What is at capacity when a receiver refuses with [`DeliveryError::Capacity`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Exhausted {
    /// The receiver's mailbox is full.
    Mailbox,
    /// Another limit of the receiving host, named by the host (e.g. `activation cap of
    /// Worker reached`).
    Host(String),
    /// The receiver's handler answered `RESOURCE_EXHAUSTED` with a retry hint; its message is
    /// kept as it gave it.
    Handler(String),
}

/// Why a delivery did not happen. The variant decides what the relay does next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    /// The receiver is at capacity. The limiter halves; the message backs off for at least
    /// `retry_after_ms`.
    #[error("{}", CapacityText(exhausted, *retry_after_ms))]
    Capacity {
        /// What is exhausted.
        exhausted: Exhausted,
        /// The receiver's hint: do not try again sooner.
        retry_after_ms: u64,
    },
    /// A failure that may go away (actor restarting, timeout). The limit is unchanged; the
    /// message backs off.
    #[error("{0}")]
    Transient(String),
    /// The delivering host cannot reach the receiver's host now because it is cut off itself
    /// (a cluster member that lost NATS or its lease): nothing is wrong with the message or
    /// its receiver. The limit is unchanged; the message backs off and is tried again however
    /// often it takes, without the attempt counting toward `max_attempts` (a TTL still
    /// bounds it), so a host's own outage dead-letters nothing.
    #[error("{0}")]
    Unroutable(String),
    /// The message can never be delivered (undecodable payload, unknown actor type). It is
    /// dead-lettered at once.
    #[error("{0}")]
    Permanent(String),
    /// No actor type of the receiver's name: dead-lettered at once, like
    /// [`DeliveryError::Permanent`], and told apart so `dispatch` can say `not-found`.
    #[error("{0}")]
    NotFound(String),
}

/// `RESOURCE_EXHAUSTED: <what> (retry_after_ms=N)`, or a handler's own words.
struct CapacityText<'a>(&'a Exhausted, u64);

impl fmt::Display for CapacityText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.0 {
            Exhausted::Handler(message) => return f.write_str(message),
            Exhausted::Mailbox => "mailbox full",
            Exhausted::Host(what) => what,
        };
        write!(f, "RESOURCE_EXHAUSTED: {what} (retry_after_ms={})", self.1)
    }
}

impl DeliveryError {
    /// The receiver's mailbox is full: `RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=N)`.
    pub fn mailbox_full(retry_after_ms: u64) -> Self {
        DeliveryError::Capacity {
            exhausted: Exhausted::Mailbox,
            retry_after_ms,
        }
    }

    /// Short, bounded label for metrics (`capacity`, `transient`, `unroutable`, `permanent`,
    /// `not_found`).
    pub fn kind(&self) -> &'static str {
        match self {
            DeliveryError::Capacity { .. } => "capacity",
            DeliveryError::Transient(_) => "transient",
            DeliveryError::Unroutable(_) => "unroutable",
            DeliveryError::Permanent(_) => "permanent",
            DeliveryError::NotFound(_) => "not_found",
        }
    }
}

/// Hands one stored message to its receiver. The runtime implements this with a non-blocking
/// `tell` into the receiver's mailbox (cast) or an `ask` (call); a full `Error`-strategy
/// mailbox maps to [`DeliveryError::Capacity`].
///
/// Implementations should return quickly: the relay holds a limiter permit while this runs.
#[async_trait]
pub trait Delivery: Send + Sync {
    /// Deliver `envelope`. `Ok` means the receiver has taken responsibility for it (it is
    /// acked).
    async fn deliver(&self, envelope: Envelope) -> Result<(), DeliveryError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_displays_as_the_canonical_string() {
        assert_eq!(
            DeliveryError::mailbox_full(250).to_string(),
            "RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=250)"
        );
        let host = DeliveryError::Capacity {
            exhausted: Exhausted::Host("activation cap of Worker reached".into()),
            retry_after_ms: 40,
        };
        assert_eq!(
            host.to_string(),
            "RESOURCE_EXHAUSTED: activation cap of Worker reached (retry_after_ms=40)"
        );
        let own = "RESOURCE_EXHAUSTED: worker pool busy (retry_after_ms=50)";
        let handler = DeliveryError::Capacity {
            exhausted: Exhausted::Handler(own.into()),
            retry_after_ms: 50,
        };
        assert_eq!(handler.to_string(), own, "a handler's words are kept");
        assert_eq!(handler.kind(), "capacity");
    }

    #[test]
    fn dispatch_modes_round_trip_through_their_stored_spelling() {
        for m in [DispatchMode::Cast, DispatchMode::Call] {
            assert_eq!(DispatchMode::try_from(m.as_str().to_string()), Ok(m));
        }
        assert!(DispatchMode::try_from("Cast".to_string()).is_err());
    }
}
