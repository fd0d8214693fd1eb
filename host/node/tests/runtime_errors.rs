//! The transport's error records are a mirror of the runtime's `ActorError`: every error a
//! local call can give must cross the wire (encoded, decoded) and come out identical through
//! this crate's mapping, and the records the transport raises itself must read exactly as the
//! runtime renders the same error.

use sluice_cluster::transport::{self as t, ErrorRecord, Limits, Outcome};
use sluice_node::errors::{from_record, to_record};
use sluice_runtime::{ActorError, ErrorCode, OverloadScope};

fn local_errors() -> Vec<ActorError> {
    vec![
        ActorError::mailbox_full(17),
        ActorError::deadline_exceeded(true),
        ActorError::deadline_exceeded(false),
        ActorError::overloaded(OverloadScope::Actor, 9, 8),
        ActorError::overloaded(OverloadScope::Host, 1000, 1000),
        ActorError::not_found("no actor type Nope"),
        ActorError::invalid_argument("payload of 6 bytes exceeds max_payload_bytes=5"),
        ActorError::unavailable("shutting down").with_retry_after(250),
        ActorError::internal("trap: unreachable"),
        ActorError::verbatim(ErrorCode::Internal, "my own words: ünïcode".into()),
    ]
}

#[test]
fn every_local_error_crosses_the_wire_unchanged() {
    for local in local_errors() {
        let frame = t::encode_reply(&[Outcome::Failed(to_record(&local))]);
        let back = match &t::decode_reply(&frame, &Limits::default()).unwrap()[..] {
            [Outcome::Failed(r)] => from_record(r),
            other => panic!("{other:?}"),
        };
        assert_eq!(back.to_string(), local.to_string());
        assert_eq!(back.code, local.code);
        assert_eq!(back.retry_after_ms, local.retry_after_ms);
        assert_eq!(back.skipped, local.skipped);
        assert_eq!(back.overload, local.overload);
        assert_eq!(back.is_capacity(), local.is_capacity());
    }
}

#[test]
fn the_records_this_crate_raises_read_as_the_runtime_renders_them() {
    let pairs = [
        (ErrorRecord::mailbox_full(17), ActorError::mailbox_full(17)),
        (
            ErrorRecord::deadline_exceeded(true),
            ActorError::deadline_exceeded(true),
        ),
        (
            ErrorRecord::deadline_exceeded(false),
            ActorError::deadline_exceeded(false),
        ),
        (
            ErrorRecord::overloaded(t::OverloadScope::Host, 3, 2),
            ActorError::overloaded(OverloadScope::Host, 3, 2),
        ),
        (
            ErrorRecord::payload_too_large(6, 5),
            ActorError::invalid_argument("payload of 6 bytes exceeds max_payload_bytes=5"),
        ),
        (ErrorRecord::unavailable("x"), ActorError::unavailable("x")),
        (ErrorRecord::internal("x"), ActorError::internal("x")),
        (
            ErrorRecord::invalid_argument("x"),
            ActorError::invalid_argument("x"),
        ),
    ];
    for (record, local) in pairs {
        assert_eq!(record, to_record(&local), "{local}");
    }
}
