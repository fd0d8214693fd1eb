//! The error record a remote call returns: the fields of the runtime's `ActorError` and
//! `ErrorCode` (host/runtime/src/error.rs), carried so that the caller's host rebuilds exactly
//! the error a local call gives, message byte for byte (the wiring maps
//! `ActorError::verbatim(code, message)` plus `retry_after_ms`, `skipped`, `overload`).
//!
//! The constructors render the canonical messages the same way `ActorError`'s `Display` does,
//! for the errors this crate raises itself (no responders, timeouts, malformed frames).

use std::fmt;

/// The stable error codes of the guest contract (mirror of `sluice_runtime::ErrorCode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// No room: full `error` mailbox, rate limit, memory limit.
    ResourceExhausted,
    /// The call's deadline passed.
    DeadlineExceeded,
    /// An admission cap refused the call.
    Overloaded,
    /// No such actor type.
    NotFound,
    /// The request is malformed.
    InvalidArgument,
    /// The actor or subsystem cannot serve now.
    Unavailable,
    /// The callee failed.
    Internal,
}

impl ErrorCode {
    /// The canonical upper-case prefix (`RESOURCE_EXHAUSTED`).
    pub fn canonical(self) -> &'static str {
        match self {
            Self::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Self::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Self::Overloaded => "OVERLOADED",
            Self::NotFound => "NOT_FOUND",
            Self::InvalidArgument => "INVALID_ARGUMENT",
            Self::Unavailable => "UNAVAILABLE",
            Self::Internal => "INTERNAL",
        }
    }

    /// The byte on the wire.
    pub(crate) fn to_wire(self) -> u8 {
        match self {
            Self::ResourceExhausted => 1,
            Self::DeadlineExceeded => 2,
            Self::Overloaded => 3,
            Self::NotFound => 4,
            Self::InvalidArgument => 5,
            Self::Unavailable => 6,
            Self::Internal => 7,
        }
    }

    pub(crate) fn from_wire(b: u8) -> Option<Self> {
        Some(match b {
            1 => Self::ResourceExhausted,
            2 => Self::DeadlineExceeded,
            3 => Self::Overloaded,
            4 => Self::NotFound,
            5 => Self::InvalidArgument,
            6 => Self::Unavailable,
            7 => Self::Internal,
            _ => return None,
        })
    }
}

/// Which admission cap refused a call (mirror of `sluice_runtime::OverloadScope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverloadScope {
    /// The target actor's queue cap.
    Actor,
    /// The host-wide in-flight cap.
    Host,
}

/// Details of an `OVERLOADED` refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overload {
    /// Which cap.
    pub scope: OverloadScope,
    /// Queued plus running turns at the refusal.
    pub depth: u64,
    /// The cap.
    pub limit: u64,
}

/// An error as it crosses the wire: code, complete message, and the structured details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorRecord {
    /// The stable code.
    pub code: ErrorCode,
    /// The complete message callers see (`RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=5)`).
    pub message: String,
    /// When retrying is likely to succeed.
    pub retry_after_ms: Option<u64>,
    /// For `DEADLINE_EXCEEDED`: the queued turn never ran.
    pub skipped: bool,
    /// For `OVERLOADED`.
    pub overload: Option<Overload>,
}

impl ErrorRecord {
    /// A record with a complete message of its own.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            retry_after_ms: None,
            skipped: false,
            overload: None,
        }
    }

    /// `CODE: detail`, as `ActorError::new` renders it.
    pub fn canonical(code: ErrorCode, detail: &str) -> Self {
        Self::new(code, format!("{}: {detail}", code.canonical()))
    }

    /// `RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=N)`.
    pub fn mailbox_full(retry_after_ms: u64) -> Self {
        Self {
            retry_after_ms: Some(retry_after_ms),
            ..Self::new(
                ErrorCode::ResourceExhausted,
                format!("RESOURCE_EXHAUSTED: mailbox full (retry_after_ms={retry_after_ms})"),
            )
        }
    }

    /// The deadline passed; `skipped` when the turn never ran.
    pub fn deadline_exceeded(skipped: bool) -> Self {
        let detail = if skipped {
            "call-timeout (skipped: the queued turn never ran)"
        } else {
            "call-timeout (the turn may still be running)"
        };
        Self {
            skipped,
            ..Self::canonical(ErrorCode::DeadlineExceeded, detail)
        }
    }

    /// An admission cap refused the call.
    pub fn overloaded(scope: OverloadScope, depth: u64, limit: u64) -> Self {
        let s = match scope {
            OverloadScope::Actor => "actor",
            OverloadScope::Host => "host",
        };
        Self {
            overload: Some(Overload {
                scope,
                depth,
                limit,
            }),
            ..Self::new(
                ErrorCode::Overloaded,
                format!("OVERLOADED: queue at capacity (scope={s}, depth={depth}, limit={limit})"),
            )
        }
    }

    /// `INVALID_ARGUMENT: detail`.
    pub fn invalid_argument(detail: &str) -> Self {
        Self::canonical(ErrorCode::InvalidArgument, detail)
    }

    /// `UNAVAILABLE: detail`.
    pub fn unavailable(detail: &str) -> Self {
        Self::canonical(ErrorCode::Unavailable, detail)
    }

    /// `INTERNAL: detail`.
    pub fn internal(detail: &str) -> Self {
        Self::canonical(ErrorCode::Internal, detail)
    }

    /// The message the runtime gives an oversize payload.
    pub fn payload_too_large(len: usize, max: usize) -> Self {
        Self::invalid_argument(&format!(
            "payload of {len} bytes exceeds max_payload_bytes={max}"
        ))
    }
}

impl fmt::Display for ErrorRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ErrorRecord {}

/// What became of a tell (mirror of `sluice_runtime::TellReceipt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TellReceipt {
    /// Queued, nothing dropped.
    Queued,
    /// Queued after `drop_oldest` discarded the oldest message.
    DisplacedOldest,
    /// `drop_newest` discarded this message.
    DroppedNewest,
}

impl TellReceipt {
    pub(crate) fn to_wire(self) -> u8 {
        match self {
            Self::Queued => 0,
            Self::DisplacedOldest => 1,
            Self::DroppedNewest => 2,
        }
    }

    pub(crate) fn from_wire(b: u8) -> Option<Self> {
        Some(match b {
            0 => Self::Queued,
            1 => Self::DisplacedOldest,
            2 => Self::DroppedNewest,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_messages_read_as_the_runtime_renders_them() {
        assert_eq!(
            ErrorRecord::mailbox_full(7).to_string(),
            "RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=7)"
        );
        assert_eq!(
            ErrorRecord::overloaded(OverloadScope::Host, 10, 8).to_string(),
            "OVERLOADED: queue at capacity (scope=host, depth=10, limit=8)"
        );
        assert_eq!(
            ErrorRecord::deadline_exceeded(true).to_string(),
            "DEADLINE_EXCEEDED: call-timeout (skipped: the queued turn never ran)"
        );
    }

    #[test]
    fn wire_bytes_round_trip_and_unknown_bytes_are_refused() {
        for b in 0..=255u8 {
            if let Some(c) = ErrorCode::from_wire(b) {
                assert_eq!(c.to_wire(), b);
            }
            if let Some(r) = TellReceipt::from_wire(b) {
                assert_eq!(r.to_wire(), b);
            }
        }
        assert_eq!(ErrorCode::from_wire(0), None);
        assert_eq!(ErrorCode::from_wire(8), None);
        assert_eq!(TellReceipt::from_wire(3), None);
    }
}
