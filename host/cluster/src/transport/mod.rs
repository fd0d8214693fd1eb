//! Remote tell/ask over core NATS request/reply: one subject per host
//! (`sluice.<cluster>.host.<node>`), a versioned compact binary frame (frame.rs) that carries a
//! batch of calls and comes back with one outcome per call, and error records that rebuild on
//! the caller exactly the error a local call gives.

mod client;
pub(crate) mod codec;
mod error;
mod frame;
mod server;

pub use client::{Client, ClientConfig, Outgoing};
pub use codec::DecodeError;
pub use error::{ErrorCode, ErrorRecord, Overload, OverloadScope, TellReceipt};
pub use frame::{
    Call, CallKind, Limits, MAX_ID_BYTES, MAX_MESSAGE_BYTES, MAX_MSG_TYPE_BYTES,
    MAX_PRINCIPAL_BYTES, Outcome, Request, WIRE_VERSION, decode_reply, decode_request,
    encode_reply, encode_request,
};
pub(crate) use frame::{KIND_EVENT, read_header, write_header};
pub use server::{
    DEFAULT_MAX_INFLIGHT_ASKS, Handler, Inbound, PrepareFuture, Prepared, ReplyFuture, Server,
    ServerConfig,
};

/// Why serving could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// Subscribing to this host's subject failed.
    #[error("cluster: cannot subscribe to this host's subject: {0}")]
    Subscribe(String),
}
