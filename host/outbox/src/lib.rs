//! Sluice's durable outbox: store-and-forward with an AIMD-limited, partitioned relay.
//!
//! - [`Channel`]: one schema, two sqlx backends ([`SqliteChannel`], [`PostgresChannel`]);
//!   batched enqueue/claim/settle; claims are leases; FIFO per receiver under backoff.
//! - [`Outbox`]: what the runtime holds — [`Outbox::store`] (tell_reliable's fallback),
//!   [`Outbox::dispatch`] (guest `outbox.dispatch`), DLQ list/replay/purge, stats, and
//!   [`Outbox::start_relay`], which runs one worker per partition with a limiter per actor type
//!   (bulkheads) and a retry budget.
//! - [`Delivery`]: implemented by the runtime. It receives a typed [`Envelope`] (mode,
//!   principal, deadline, payload as [`Bytes`]); [`DeliveryError`] is the typed control signal.
//! - [`Clock`]: where every `now` comes from ([`SystemClock`]; [`TokioClock`] for tests on
//!   paused time). [`DatabaseUrl`] picks the backend; each backend is a cargo feature
//!   (`sqlite`, `postgres`, both by default).
#![warn(missing_docs)]
// Without a backend the crate still builds (a custom `Channel` can be plugged in), but the
// SQL helpers and `Outbox::open` have nothing to serve.
#![cfg_attr(
    not(any(feature = "sqlite", feature = "postgres")),
    allow(unused, unreachable_code)
)]

mod batch;
mod bulkhead;
pub mod channel;
mod clock;
mod config;
mod delivery;
mod error;
pub mod message;
pub mod metrics_help;
mod outbox;
mod relay;
mod url;

pub use bulkhead::OTHER_TYPE;
/// Payload bytes ([`NewMessage::payload`], [`Envelope::payload`]).
pub use bytes::Bytes;
#[cfg(feature = "postgres")]
pub use channel::PostgresChannel;
#[cfg(feature = "sqlite")]
pub use channel::SqliteChannel;
pub use channel::{Backend, Channel, EnqueueOptions, Promoted};
pub use clock::{Clock, SystemClock, TokioClock, now_ms};
pub use config::{OutboxConfig, OutboxConfigBuilder};
pub use delivery::{Delivery, DeliveryError, DispatchMode, Envelope, Exhausted};
pub use error::{Error, Result};
pub use message::{
    Conflict, DeadLetter, DlqSelector, EnqueueOutcome, NewMessage, OutboxMessage, PartitionStats,
    PendingReminder,
};
pub use outbox::{DispatchOutcome, DispatchResult, MAX_REMINDER_NAME, Outbox};
pub use relay::RelayHandle;
pub use sluice_flow::backoff::{RetryBudgetConfig, RetryPolicy};
pub use sluice_flow::limiter::{ConcurrencyConfig, ConcurrencyStrategy};
pub use sluice_trace::TraceParent;
pub use url::DatabaseUrl;
