//! The Sluice host runtime: one wasmtime engine, actor types loaded from components, bounded
//! mailboxes, sequential turns, tell/ask, supervision and deploy-without-restart. No files, no
//! databases, no network: an app folder is the `sluice-app` crate's, the outbox's storage the
//! `sluice-outbox` crate's, and where a remote actor runs a [`Route`]'s.
//!
//! # Layout
//! Each file is one concept, and files depend on each other in one direction only (a test,
//! `tests/module_graph.rs`, keeps it so):
//! - vocabulary: `error`, `id`, `call` (options and receipts), `clock`, `config/`, `bindings`,
//!   `activations` (the hook a cluster's single-activation rule stands in);
//! - `engine/`: the wasmtime engine, its epoch ticker, the component cache;
//! - `guest/`: each instance's store state and the `sluice:actor` imports, which reach the
//!   host only through the `GuestHost` trait;
//! - `actor/`: activations — a type's module and shared state, cells and their mailboxes,
//!   slots under `max_activations` and eviction, the supervisor running an actor's turns;
//! - the gates and routes in front of a mailbox: `admission`, `message`, `local` (this
//!   host's activations), [`Route`] (the seam a cluster stands in), `routing`;
//! - glue to the other crates: `timers`, `events/` (the bus), `reliable` (the outbox);
//! - `host/`: the wiring and the public [`Host`].
//!
//! # Features
//! `sqlite` and `postgres`, both on by default, are the outbox's backends passed through to
//! `sluice-outbox`: an embedder that uses one store takes
//! `sluice-runtime = { default-features = false, features = ["sqlite"] }` and compiles no
//! driver for the other.
#![warn(missing_docs)]

mod activations;
mod actor;
mod admission;
mod bindings;
mod call;
mod clock;
pub mod config;
mod engine;
pub mod error;
mod events;
mod guest;
mod host;
mod id;
mod local;
mod message;
pub mod metrics_help;
mod reliable;
mod route;
mod routing;
mod timers;
mod type_metrics;

pub use activations::ActivationHooks;
pub use call::{CallOptions, DeliveryPath, TellReceipt};
pub use config::{
    BusSettings, ChildSpec, HostConfig, RateLimitSettings, Subscription, SubscriptionMode,
    WasiGrants,
};
pub use error::{ActorError, ErrorCode, HostError, LoadError, Overload, OverloadScope};
pub use events::{DispatchStats, SubscriptionStats};
pub use host::{Call, Deployed, Host, ReplyWait, TypeStatus};
pub use id::{ActorId, validate_msg_type, validate_type_name};
pub use route::{Outgoing, Route};
pub use sluice_bus as bus;
pub use sluice_flow::mailbox::MailboxStrategy;
pub use sluice_outbox as outbox;
pub use sluice_trace::TraceParent;

/// Not part of the API: the engine and component cache exactly as a host builds them, for the
/// benchmarks' raw-wasmtime baseline (`tests/src/raw.rs`) and nothing else; hidden from the
/// docs and free to change without notice. (A hidden module rather than a feature: a feature
/// only the tests enabled would compile the runtime twice, once for the tests and once for
/// the `sluice` binary they run.)
#[doc(hidden)]
pub mod bench_baseline {
    pub use crate::engine::{ComponentCache, build_engine};
}
