//! Errors and receipts across the WIT boundary: the runtime's typed values to the `sluice:actor`
//! records and back (a guest's own error keeps its message byte for byte).

use crate::bindings::wit;
use crate::call::{DeliveryPath, TellReceipt};
use crate::error::{ActorError, ErrorCode, Overload, OverloadScope};

/// Rust error → WIT record.
pub(crate) fn to_wit(e: ActorError) -> wit::ActorError {
    wit::ActorError {
        code: match e.code {
            ErrorCode::ResourceExhausted => wit::ErrorCode::ResourceExhausted,
            ErrorCode::DeadlineExceeded => wit::ErrorCode::DeadlineExceeded,
            ErrorCode::Overloaded => wit::ErrorCode::Overloaded,
            ErrorCode::NotFound => wit::ErrorCode::NotFound,
            ErrorCode::InvalidArgument => wit::ErrorCode::InvalidArgument,
            ErrorCode::Unavailable => wit::ErrorCode::Unavailable,
            _ => wit::ErrorCode::Internal,
        },
        message: e.to_string(),
        retry_after_ms: e.retry_after_ms,
        skipped: e.skipped,
        overload: e.overload.map(|o| wit::OverloadInfo {
            scope: match o.scope {
                OverloadScope::Actor => wit::OverloadScope::Actor,
                OverloadScope::Host => wit::OverloadScope::Host,
            },
            depth: o.depth,
            limit: o.limit,
        }),
    }
}

/// WIT record (a guest's error) → Rust error, message kept verbatim.
pub(crate) fn from_wit(e: wit::ActorError) -> ActorError {
    let code = match e.code {
        wit::ErrorCode::ResourceExhausted => ErrorCode::ResourceExhausted,
        wit::ErrorCode::DeadlineExceeded => ErrorCode::DeadlineExceeded,
        wit::ErrorCode::Overloaded => ErrorCode::Overloaded,
        wit::ErrorCode::NotFound => ErrorCode::NotFound,
        wit::ErrorCode::InvalidArgument => ErrorCode::InvalidArgument,
        wit::ErrorCode::Unavailable => ErrorCode::Unavailable,
        wit::ErrorCode::Internal => ErrorCode::Internal,
    };
    let mut out = ActorError::verbatim(code, e.message);
    out.retry_after_ms = e.retry_after_ms;
    out.skipped = e.skipped;
    out.overload = e.overload.map(|o| Overload {
        scope: match o.scope {
            wit::OverloadScope::Actor => OverloadScope::Actor,
            wit::OverloadScope::Host => OverloadScope::Host,
        },
        depth: o.depth,
        limit: o.limit,
    });
    out
}

pub(crate) fn receipt(r: TellReceipt) -> wit::TellReceipt {
    match r {
        TellReceipt::Queued => wit::TellReceipt::Queued,
        TellReceipt::DisplacedOldest => wit::TellReceipt::DisplacedOldest,
        TellReceipt::DroppedNewest => wit::TellReceipt::DroppedNewest,
    }
}

pub(crate) fn delivery_path(p: DeliveryPath) -> wit::DeliveryPath {
    match p {
        DeliveryPath::Direct => wit::DeliveryPath::Direct,
        DeliveryPath::Outbox => wit::DeliveryPath::Outbox,
    }
}
