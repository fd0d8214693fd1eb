//! The Sluice host runtime: one wasmtime engine, actor types loaded from components, bounded
//! mailboxes, sequential turns, tell/ask, supervision and deploy-without-restart.
#![warn(missing_docs)]

mod actor;
mod admission;
mod bindings;
mod call;
pub mod config;
mod engine;
pub mod error;
mod host;
mod host_bus;
pub mod metrics_help;
#[doc(hidden)]
pub mod raw;
mod registry;
mod reliable;
mod slots;
mod state;

pub use call::Call;
pub use config::{
    AppConfig, BusSettings, ChildSpec, HostConfig, IngressSettings, RateLimitSettings,
    Subscription, SubscriptionMode, WasiGrants,
};
pub use error::{ActorError, ErrorCode, LoadError, Overload, OverloadScope, TellReceipt};
pub use host::{CallOptions, Host, TypeStatus};
pub use host_bus::{DispatchStats, SubscriptionStats};
pub use registry::ActorId;
pub use reliable::DeliveryPath;
pub use sluice_bus as bus;
pub use sluice_flow::mailbox::MailboxStrategy;
pub use sluice_outbox as outbox;
