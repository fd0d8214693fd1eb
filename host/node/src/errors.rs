//! The runtime's `ActorError` and the wire's `ErrorRecord`, each into the other, so an error
//! raised on the owner reaches the caller with the same code, message and details
//! (`RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=17)` byte for byte).

use sluice_cluster::transport::{self as t, ErrorRecord};
use sluice_runtime::{ActorError, ErrorCode, Overload, OverloadScope};

/// On the owner: the error a local delivery gave, as a record for the reply.
pub fn to_record(e: &ActorError) -> ErrorRecord {
    ErrorRecord {
        code: match e.code {
            ErrorCode::ResourceExhausted => t::ErrorCode::ResourceExhausted,
            ErrorCode::DeadlineExceeded => t::ErrorCode::DeadlineExceeded,
            ErrorCode::Overloaded => t::ErrorCode::Overloaded,
            ErrorCode::NotFound => t::ErrorCode::NotFound,
            ErrorCode::InvalidArgument => t::ErrorCode::InvalidArgument,
            ErrorCode::Unavailable => t::ErrorCode::Unavailable,
            _ => t::ErrorCode::Internal,
        },
        message: e.to_string(),
        retry_after_ms: e.retry_after_ms,
        skipped: e.skipped,
        overload: e.overload.map(|o| t::Overload {
            scope: match o.scope {
                OverloadScope::Actor => t::OverloadScope::Actor,
                OverloadScope::Host => t::OverloadScope::Host,
            },
            depth: o.depth,
            limit: o.limit,
        }),
    }
}

/// On the caller: a record from the owner as the error a local call would have given.
pub fn from_record(r: &ErrorRecord) -> ActorError {
    let code = match r.code {
        t::ErrorCode::ResourceExhausted => ErrorCode::ResourceExhausted,
        t::ErrorCode::DeadlineExceeded => ErrorCode::DeadlineExceeded,
        t::ErrorCode::Overloaded => ErrorCode::Overloaded,
        t::ErrorCode::NotFound => ErrorCode::NotFound,
        t::ErrorCode::InvalidArgument => ErrorCode::InvalidArgument,
        t::ErrorCode::Unavailable => ErrorCode::Unavailable,
        _ => ErrorCode::Internal,
    };
    let mut e = ActorError::verbatim(code, r.message.clone());
    e.retry_after_ms = r.retry_after_ms;
    e.skipped = r.skipped;
    e.overload = r.overload.map(|o| Overload {
        scope: match o.scope {
            t::OverloadScope::Actor => OverloadScope::Actor,
            t::OverloadScope::Host => OverloadScope::Host,
        },
        depth: o.depth,
        limit: o.limit,
    });
    e
}
