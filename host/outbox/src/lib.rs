//! Sluice's durable outbox: store-and-forward with an AIMD-limited, partitioned relay.
//!
//! - [`Channel`]: one schema, two sqlx backends ([`SqliteChannel`], [`PostgresChannel`]);
//!   batched enqueue/claim/settle; claims are leases; FIFO per receiver under backoff.
//! - [`Outbox`]: what the runtime holds — [`Outbox::store`] (tell_reliable's fallback),
//!   [`Outbox::dispatch`] (guest `outbox.dispatch`), DLQ list/replay/purge, stats, and
//!   [`Outbox::start_relay`], which runs one worker per partition with a limiter per actor type
//!   (bulkheads) and a retry budget.
//! - [`Delivery`]: implemented by the runtime; [`DeliveryError`] is the typed control signal.
#![warn(missing_docs)]

mod bulkhead;
pub mod channel;
mod config;
mod delivery;
mod error;
pub mod message;
pub mod metrics_help;
mod outbox;
mod relay;

pub use bulkhead::OTHER_TYPE;
pub use channel::{Backend, Channel, EnqueueOptions, PostgresChannel, SqliteChannel};
pub use config::{OutboxConfig, OutboxConfigBuilder};
pub use delivery::{Delivery, DeliveryError};
pub use error::{Error, Result};
pub use message::{
    Conflict, DeadLetter, DlqSelector, EnqueueOutcome, NewMessage, OutboxMessage, PartitionStats,
};
pub use outbox::{DispatchResult, Outbox, now_ms};
pub use relay::RelayHandle;
pub use sluice_flow::backoff::{RetryBudgetConfig, RetryPolicy};
pub use sluice_flow::limiter::{ConcurrencyConfig, ConcurrencyStrategy};
