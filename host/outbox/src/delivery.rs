//! The delivery contract between the outbox and whoever owns the receivers (the runtime).

use async_trait::async_trait;

use crate::message::OutboxMessage;

/// Why a delivery did not happen. The variant decides what the relay does next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    /// The receiver is at capacity (its mailbox is full, or its handler said it is). The
    /// limiter halves; the message backs off for at least `retry_after_ms`.
    #[error("RESOURCE_EXHAUSTED: {message} (retry_after_ms={retry_after_ms})")]
    Capacity {
        /// What is exhausted, e.g. `mailbox full`.
        message: String,
        /// The receiver's hint: do not try again sooner.
        retry_after_ms: u64,
    },
    /// A failure that may go away (actor restarting, timeout). The limit is unchanged; the
    /// message backs off.
    #[error("{0}")]
    Transient(String),
    /// The message can never be delivered (undecodable payload, unknown actor type). It is
    /// dead-lettered at once.
    #[error("{0}")]
    Permanent(String),
}

impl DeliveryError {
    /// The receiver's mailbox is full: `RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=N)`.
    pub fn mailbox_full(retry_after_ms: u64) -> Self {
        DeliveryError::Capacity {
            message: "mailbox full".into(),
            retry_after_ms,
        }
    }

    /// Short, bounded label for metrics (`capacity`, `transient`, `permanent`).
    pub fn kind(&self) -> &'static str {
        match self {
            DeliveryError::Capacity { .. } => "capacity",
            DeliveryError::Transient(_) => "transient",
            DeliveryError::Permanent(_) => "permanent",
        }
    }
}

/// Hands one stored message to its receiver. The runtime implements this with a non-blocking
/// `tell` into the receiver's mailbox; a full `Error`-strategy mailbox maps to
/// [`DeliveryError::Capacity`].
///
/// Implementations should return quickly: the relay holds a limiter permit while this runs.
#[async_trait]
pub trait Delivery: Send + Sync {
    /// Deliver `msg`. `Ok` means the receiver has taken responsibility for it (it is acked).
    async fn deliver(&self, msg: &OutboxMessage) -> Result<(), DeliveryError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_displays_as_the_canonical_string() {
        let e = DeliveryError::mailbox_full(250);
        assert_eq!(
            e.to_string(),
            "RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=250)"
        );
    }
}
