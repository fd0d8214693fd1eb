//! The wire format of remote tell/ask: a request frame carries a batch of calls, its reply one
//! outcome per call, in order.
//!
//! ```text
//! frame    = "SL" version:u8 kind:u8 body          (kind 1 = request, 2 = reply)
//! request  = origin:str count:varint call*count
//! call     = flags:u8 target:str msg_type:str [sender:str] [principal:str]
//!            [deadline_ms:varint] [trace:str] payload:bytes
//!            flags: 1 ask (else tell), 2 internal (non-empty call chain),
//!                   4 deadline, 8 sender, 16 principal, 32 trace; other bits must be 0
//!            trace: the caller's W3C `traceparent` (the receiving turn is its child)
//! reply    = count:varint outcome*count
//! outcome  = 0 payload:bytes | 1 receipt:u8 | 2 error
//! error    = code:u8 flags:u8 message:str [retry_after_ms:varint] [scope:u8 depth:varint limit:varint]
//!            flags: 1 retry_after_ms, 2 skipped, 4 overload
//! str      = len:varint utf8      bytes = len:varint raw
//! ```
//!
//! `deadline_ms` is what was left of the caller's budget when the frame was encoded; the
//! receiver counts it from arrival and subtracts nothing. A reply of a single error to a batch
//! of several calls (a frame that could not be read at all) applies to every call.

use bytes::Bytes;

use super::codec::{DecodeError, Reader, Writer};
use super::error::{ErrorCode, ErrorRecord, Overload, OverloadScope, TellReceipt};

/// The wire version this host speaks (also announced in its member record).
pub const WIRE_VERSION: u8 = 1;
const MAGIC: [u8; 2] = *b"SL";
const KIND_REQUEST: u8 = 1;
const KIND_REPLY: u8 = 2;
pub(crate) const KIND_EVENT: u8 = 3;

/// Longest actor id (`Type/key`: 64-byte type, 256 characters of up to 4 bytes).
pub const MAX_ID_BYTES: usize = 2048;
/// Longest message type.
pub const MAX_MSG_TYPE_BYTES: usize = 256;
/// Longest principal.
pub const MAX_PRINCIPAL_BYTES: usize = 1024;
/// Longest `traceparent` (W3C: 55 characters for version 00; later versions may add fields).
pub const MAX_TRACEPARENT_BYTES: usize = 256;
/// Longest error message.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// Size limits enforced on decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest payload of one call or reply. Default 5 MiB (the host's `max_payload_bytes`).
    pub max_payload_bytes: usize,
    /// Most calls in one frame. Default 1024.
    pub max_batch: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_payload_bytes: 5 * 1024 * 1024,
            max_batch: 1024,
        }
    }
}

/// Tell or ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// Fire and forget: the reply is a receipt, sent once the message is queued.
    Tell,
    /// Request/reply: the reply is the handler's payload.
    Ask,
}

impl CallKind {
    /// Both kinds, in [`CallKind::index`] order.
    pub const ALL: [CallKind; 2] = [CallKind::Tell, CallKind::Ask];

    /// This kind's position in [`CallKind::ALL`] (for per-kind tallies).
    pub fn index(self) -> usize {
        self as usize
    }

    /// A bounded metric label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Tell => "tell",
            Self::Ask => "ask",
        }
    }
}

/// One remote call as it travels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// Tell or ask.
    pub kind: CallKind,
    /// The receiving actor, `Type/key`.
    pub target: String,
    /// The message type.
    pub msg_type: String,
    /// The payload.
    pub payload: Bytes,
    /// The calling actor, if any.
    pub sender: Option<String>,
    /// On whose behalf; `None` = the system principal.
    pub principal: Option<String>,
    /// What was left of the caller's deadline at send time, ms.
    pub deadline_ms: Option<u64>,
    /// Made from inside a turn (non-empty call chain): admission caps do not apply.
    pub internal: bool,
    /// The caller's span context as a W3C `traceparent`, when traces are on.
    pub trace: Option<String>,
}

/// A decoded request: the sending host and each call, or why that call was refused
/// (e.g. its payload is over the limit) while the others of the batch go ahead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The sending host's node id.
    pub origin: String,
    /// The calls in order.
    pub calls: Vec<Result<Call, ErrorRecord>>,
}

/// What became of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// An ask's reply payload.
    Replied(Bytes),
    /// A tell's receipt.
    Receipt(TellReceipt),
    /// The call failed.
    Failed(ErrorRecord),
    /// Nothing was delivered: the actor runs elsewhere. Carries the owner's node id when the
    /// receiver knows it (empty: look it up again). Safe to resend there.
    Moved(String),
}

pub(crate) fn write_header(w: &mut Writer, kind: u8) {
    w.buf.extend_from_slice(&MAGIC);
    w.u8(WIRE_VERSION);
    w.u8(kind);
}

pub(crate) fn read_header(r: &mut Reader<'_>, want: u8) -> Result<(), DecodeError> {
    if r.u8()? != MAGIC[0] || r.u8()? != MAGIC[1] {
        return Err(DecodeError::BadMagic);
    }
    let version = r.u8()?;
    if version != WIRE_VERSION {
        return Err(DecodeError::Version {
            found: version,
            supported: WIRE_VERSION,
        });
    }
    match r.u8()? {
        k if k == want => Ok(()),
        k => Err(DecodeError::Kind(k)),
    }
}

const F_ASK: u8 = 1;
const F_INTERNAL: u8 = 2;
const F_DEADLINE: u8 = 4;
const F_SENDER: u8 = 8;
const F_PRINCIPAL: u8 = 16;
const F_TRACE: u8 = 32;

/// Encodes a request frame.
pub fn encode_request(origin: &str, calls: &[Call]) -> Bytes {
    let size: usize = calls
        .iter()
        .map(|c| 32 + c.target.len() + c.msg_type.len() + c.payload.len())
        .sum();
    let mut w = Writer::with_capacity(16 + origin.len() + size);
    write_header(&mut w, KIND_REQUEST);
    w.str(origin);
    w.varint(calls.len() as u64);
    for c in calls {
        let mut flags = 0;
        if c.kind == CallKind::Ask {
            flags |= F_ASK;
        }
        if c.internal {
            flags |= F_INTERNAL;
        }
        flags |= if c.deadline_ms.is_some() {
            F_DEADLINE
        } else {
            0
        };
        flags |= if c.sender.is_some() { F_SENDER } else { 0 };
        flags |= if c.principal.is_some() {
            F_PRINCIPAL
        } else {
            0
        };
        flags |= if c.trace.is_some() { F_TRACE } else { 0 };
        w.u8(flags);
        w.str(&c.target);
        w.str(&c.msg_type);
        if let Some(s) = &c.sender {
            w.str(s);
        }
        if let Some(p) = &c.principal {
            w.str(p);
        }
        if let Some(d) = c.deadline_ms {
            w.varint(d);
        }
        if let Some(t) = &c.trace {
            w.str(t);
        }
        w.bytes(&c.payload);
    }
    w.buf.into()
}

/// Decodes a request frame within `limits`.
pub fn decode_request(frame: &Bytes, limits: &Limits) -> Result<Request, DecodeError> {
    let mut r = Reader::new(frame);
    read_header(&mut r, KIND_REQUEST)?;
    let origin = r.str("origin", crate::names::MAX_NODE_ID)?;
    let count = r.varint()?;
    if count == 0 || count > limits.max_batch as u64 {
        return Err(DecodeError::BatchSize {
            count,
            max: limits.max_batch,
        });
    }
    let mut calls = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let flags = r.u8()?;
        if flags & !(F_ASK | F_INTERNAL | F_DEADLINE | F_SENDER | F_PRINCIPAL | F_TRACE) != 0 {
            return Err(DecodeError::Tag {
                field: "call flags",
                value: flags,
            });
        }
        let target = r.str("target", MAX_ID_BYTES)?;
        let msg_type = r.str("msg_type", MAX_MSG_TYPE_BYTES)?;
        let sender = (flags & F_SENDER != 0)
            .then(|| r.str("sender", MAX_ID_BYTES))
            .transpose()?;
        let principal = (flags & F_PRINCIPAL != 0)
            .then(|| r.str("principal", MAX_PRINCIPAL_BYTES))
            .transpose()?;
        let deadline_ms = (flags & F_DEADLINE != 0).then(|| r.varint()).transpose()?;
        let trace = (flags & F_TRACE != 0)
            .then(|| r.str("trace", MAX_TRACEPARENT_BYTES))
            .transpose()?;
        // An oversize payload refuses this call only: skip it, keep reading the batch. The
        // length is still checked against the frame so a lie cannot read past it.
        let len = r.len_field("payload", usize::MAX)?;
        if len > limits.max_payload_bytes {
            r.skip(len);
            calls.push(Err(ErrorRecord::payload_too_large(
                len,
                limits.max_payload_bytes,
            )));
            continue;
        }
        let payload = r.take(len);
        calls.push(Ok(Call {
            kind: if flags & F_ASK != 0 {
                CallKind::Ask
            } else {
                CallKind::Tell
            },
            target,
            msg_type,
            payload,
            sender,
            principal,
            deadline_ms,
            internal: flags & F_INTERNAL != 0,
            trace,
        }));
    }
    r.finish()?;
    Ok(Request { origin, calls })
}

/// Encodes a reply frame.
pub fn encode_reply(outcomes: &[Outcome]) -> Bytes {
    let size: usize = outcomes
        .iter()
        .map(|o| match o {
            Outcome::Replied(p) => 11 + p.len(),
            Outcome::Receipt(_) => 2,
            Outcome::Failed(e) => 32 + e.message.len(),
            Outcome::Moved(owner) => 11 + owner.len(),
        })
        .sum();
    let mut w = Writer::with_capacity(8 + size);
    write_header(&mut w, KIND_REPLY);
    w.varint(outcomes.len() as u64);
    for o in outcomes {
        match o {
            Outcome::Replied(p) => {
                w.u8(0);
                w.bytes(p);
            }
            Outcome::Receipt(r) => {
                w.u8(1);
                w.u8(r.to_wire());
            }
            Outcome::Failed(e) => {
                w.u8(2);
                encode_error(&mut w, e);
            }
            Outcome::Moved(owner) => {
                w.u8(3);
                w.str(owner);
            }
        }
    }
    w.buf.into()
}

fn encode_error(w: &mut Writer, e: &ErrorRecord) {
    w.u8(e.code.to_wire());
    let mut flags = 0;
    flags |= if e.retry_after_ms.is_some() { 1 } else { 0 };
    flags |= if e.skipped { 2 } else { 0 };
    flags |= if e.overload.is_some() { 4 } else { 0 };
    w.u8(flags);
    w.str(&e.message);
    if let Some(ms) = e.retry_after_ms {
        w.varint(ms);
    }
    if let Some(o) = e.overload {
        w.u8(match o.scope {
            OverloadScope::Actor => 0,
            OverloadScope::Host => 1,
        });
        w.varint(o.depth);
        w.varint(o.limit);
    }
}

fn decode_error(r: &mut Reader<'_>) -> Result<ErrorRecord, DecodeError> {
    let c = r.u8()?;
    let code = ErrorCode::from_wire(c).ok_or(DecodeError::Tag {
        field: "error code",
        value: c,
    })?;
    let flags = r.u8()?;
    if flags & !7 != 0 {
        return Err(DecodeError::Tag {
            field: "error flags",
            value: flags,
        });
    }
    let message = r.str("error message", MAX_MESSAGE_BYTES)?;
    let retry_after_ms = (flags & 1 != 0).then(|| r.varint()).transpose()?;
    let overload = if flags & 4 != 0 {
        let scope = match r.u8()? {
            0 => OverloadScope::Actor,
            1 => OverloadScope::Host,
            value => {
                return Err(DecodeError::Tag {
                    field: "overload scope",
                    value,
                });
            }
        };
        Some(Overload {
            scope,
            depth: r.varint()?,
            limit: r.varint()?,
        })
    } else {
        None
    };
    Ok(ErrorRecord {
        code,
        message,
        retry_after_ms,
        skipped: flags & 2 != 0,
        overload,
    })
}

/// Decodes a reply frame within `limits`.
pub fn decode_reply(frame: &Bytes, limits: &Limits) -> Result<Vec<Outcome>, DecodeError> {
    let mut r = Reader::new(frame);
    read_header(&mut r, KIND_REPLY)?;
    let count = r.varint()?;
    if count == 0 || count > limits.max_batch as u64 {
        return Err(DecodeError::BatchSize {
            count,
            max: limits.max_batch,
        });
    }
    let mut out = Vec::with_capacity(count as usize);
    for _ in 0..count {
        out.push(match r.u8()? {
            0 => Outcome::Replied(r.bytes("reply payload", limits.max_payload_bytes)?),
            1 => {
                let b = r.u8()?;
                Outcome::Receipt(TellReceipt::from_wire(b).ok_or(DecodeError::Tag {
                    field: "receipt",
                    value: b,
                })?)
            }
            2 => Outcome::Failed(decode_error(&mut r)?),
            3 => Outcome::Moved(r.str("owner", MAX_ID_BYTES)?),
            value => {
                return Err(DecodeError::Tag {
                    field: "outcome",
                    value,
                });
            }
        });
    }
    r.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn call(kind: CallKind, payload: &[u8]) -> Call {
        Call {
            kind,
            target: "Counter/ключ.1".into(),
            msg_type: "incr".into(),
            payload: Bytes::copy_from_slice(payload),
            sender: Some("Caller/9".into()),
            principal: Some("alice".into()),
            deadline_ms: Some(1234),
            internal: true,
            trace: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into()),
        }
    }

    #[test]
    fn a_request_round_trips_every_field() {
        let calls = vec![
            call(CallKind::Ask, b"x"),
            Call {
                sender: None,
                principal: None,
                deadline_ms: None,
                internal: false,
                trace: None,
                ..call(CallKind::Tell, b"")
            },
        ];
        let frame = encode_request("h1", &calls);
        let r = decode_request(&frame, &Limits::default()).unwrap();
        assert_eq!(r.origin, "h1");
        assert_eq!(r.calls, calls.into_iter().map(Ok).collect::<Vec<_>>());
    }

    #[test]
    fn a_small_tell_costs_few_bytes_on_the_wire() {
        let c = Call {
            sender: None,
            principal: None,
            deadline_ms: None,
            internal: false,
            trace: None,
            target: "Counter/1".into(),
            ..call(CallKind::Tell, &[0; 64])
        };
        // 4 header + 3 origin + 1 count + 1 flags + 10 target + 5 type + 1 len + 64 payload.
        assert_eq!(encode_request("h1", &[c]).len(), 89);
    }

    #[test]
    fn replies_round_trip_every_outcome() {
        let outcomes = vec![
            Outcome::Replied(Bytes::from_static(b"ok")),
            Outcome::Receipt(TellReceipt::DroppedNewest),
            Outcome::Failed(ErrorRecord::mailbox_full(17)),
            Outcome::Failed(ErrorRecord::overloaded(OverloadScope::Actor, 9, 8)),
            Outcome::Failed(ErrorRecord::deadline_exceeded(true)),
            Outcome::Moved("host-b".into()),
            Outcome::Moved(String::new()),
        ];
        let frame = encode_reply(&outcomes);
        assert_eq!(decode_reply(&frame, &Limits::default()).unwrap(), outcomes);
    }

    #[test]
    fn an_oversize_payload_refuses_that_call_only() {
        let limits = Limits {
            max_payload_bytes: 4,
            max_batch: 8,
        };
        let frame = encode_request(
            "h",
            &[
                call(CallKind::Tell, b"1234"),
                call(CallKind::Tell, b"12345"),
                call(CallKind::Tell, b""),
            ],
        );
        let r = decode_request(&frame, &limits).unwrap();
        assert!(r.calls[0].is_ok() && r.calls[2].is_ok());
        let e = r.calls[1].clone().unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArgument);
        assert_eq!(
            e.message,
            "INVALID_ARGUMENT: payload of 5 bytes exceeds max_payload_bytes=4"
        );
    }

    #[test]
    fn foreign_and_future_frames_are_typed_errors() {
        let l = Limits::default();
        let d = |b: &'static [u8]| decode_request(&Bytes::from_static(b), &l).unwrap_err();
        assert_eq!(d(b"hello"), DecodeError::BadMagic);
        assert_eq!(d(b""), DecodeError::Truncated);
        assert_eq!(
            d(b"SL\x09\x01"),
            DecodeError::Version {
                found: 9,
                supported: 1
            }
        );
        assert_eq!(d(b"SL\x01\x02"), DecodeError::Kind(2));
        assert!(matches!(
            d(b"SL\x01\x01\x01h\x00"),
            DecodeError::BatchSize { count: 0, .. }
        ));
        assert!(matches!(
            d(b"SL\x01\x01\x01h\x01\x80"),
            DecodeError::Tag { value: 0x80, .. }
        ));
        let mut frame = encode_request("h", &[call(CallKind::Ask, b"p")]).to_vec();
        frame.push(0);
        assert_eq!(
            decode_request(&Bytes::from(frame), &l).unwrap_err(),
            DecodeError::Trailing(1)
        );
        let many = Limits { max_batch: 2, ..l };
        let three = encode_request("h", &vec![call(CallKind::Tell, b""); 3]);
        assert!(matches!(
            decode_request(&three, &many).unwrap_err(),
            DecodeError::BatchSize { count: 3, max: 2 }
        ));
    }

    proptest! {
        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let b = Bytes::from(bytes);
            let _ = decode_request(&b, &Limits::default());
            let _ = decode_reply(&b, &Limits::default());
        }

        #[test]
        fn truncating_a_valid_frame_is_always_an_error(cut in 0usize..60) {
            let frame = encode_request("h1", &[call(CallKind::Ask, b"payload")]);
            let cut = cut.min(frame.len() - 1);
            prop_assert!(decode_request(&frame.slice(..cut), &Limits::default()).is_err());
        }

        #[test]
        fn requests_round_trip(
            target in "[A-Za-z]{1,8}/\\PC{1,20}",
            msg_type in "[a-z]{0,10}",
            payload in proptest::collection::vec(any::<u8>(), 0..100),
            deadline in proptest::option::of(any::<u64>()),
            ask in any::<bool>(),
            internal in any::<bool>(),
            trace in proptest::option::of("[0-9a-f-]{0,60}"),
        ) {
            let c = Call {
                kind: if ask { CallKind::Ask } else { CallKind::Tell },
                target, msg_type, payload: payload.into(), sender: None,
                principal: Some("p".into()), deadline_ms: deadline, internal, trace,
            };
            let frame = encode_request("n", std::slice::from_ref(&c));
            let r = decode_request(&frame, &Limits::default()).unwrap();
            prop_assert_eq!(r.calls, vec![Ok(c)]);
        }
    }
}
