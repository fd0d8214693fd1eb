//! Sluice's per-principal event bus: broadcast ring, routed DRR sub-queues, IPC rate limiter, dispatcher queues.
//!
//! Four gates, upstream to downstream (seed 004):
//!
//! | layer | type | mechanism | refusal |
//! |-------|------|-----------|---------|
//! | IPC rate limiter | [`IpcRateLimiter`] | byte window per (actor type, principal) | typed error, event never reaches the bus |
//! | broadcast ring | [`EventReceiver`] | `tokio::sync::broadcast`, 1024 slots | a lagging receiver skips ahead and counts |
//! | routed demux | [`RoutedReceiver`] | per-principal FIFO, DRR drain, byte budget | oldest evictable head evicted, metric |
//! | dispatcher | [`Dispatcher`] | per-(actor type, principal) queue of 64 | `try_send` refusal, value returned |
//!
//! [`EventBus::publish`] sends to the broadcast ring first, so a slow routed
//! enqueue never delays untargeted consumers, then fans out to every routed
//! subscription whose pattern matches, holding the routes lock only while it
//! collects them.
//!
//! Metric labels are bounded: subscriber labels are `&'static str` chosen in
//! code, and principals appear only as their [`PrincipalClass`]; principal ids
//! go in tracing fields.
#![warn(missing_docs)]

mod broadcast;
mod bus;
pub mod dispatcher;
mod event;
pub mod metrics;
mod ratelimit;
mod route;

pub use broadcast::EventReceiver;
pub use bus::{
    BusConfig, DEFAULT_BROADCAST_CAPACITY, EventBus, PublishError, PublishReport, RouteSummary,
};
pub use dispatcher::{
    DEFAULT_IDLE_GRACE, DEFAULT_MAX_QUEUES_PER_ACTOR_TYPE, DEFAULT_QUEUE_CAPACITY, DispatchError,
    DispatchKey, Dispatcher, DispatcherConfig, DispatcherStats, Handler,
};
pub use event::{Event, PrincipalClass, SYSTEM_PRINCIPAL};
pub use ratelimit::IpcRateLimiter;
pub use route::{RouteStats, RouteStatsHandle, RoutedReceiver};
pub use sluice_flow::drr::DrrConfig;
pub use sluice_flow::ratelimit::{RateLimitConfig, RateLimitError};
pub use sluice_flow::topic::{TopicError, TopicPattern};
