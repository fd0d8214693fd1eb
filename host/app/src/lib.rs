//! Sluice apps: an app folder is an `app-config.toml` and the modules it names. This crate
//! parses that file and starts a host for it: the runtime (`sluice-runtime`, which knows
//! nothing of files or databases) plus the durable outbox its `[outbox]` table and the
//! database URL select. `sluice run`, the examples and the tests start hosts through it.
#![warn(missing_docs)]

mod config;
mod start;

pub use config::{AppConfig, IngressSettings, SupervisorConfig};
pub use sluice_outbox::DatabaseUrl;
pub use start::{AppError, StartStep, start, start_prepared, start_reporting, start_with};
