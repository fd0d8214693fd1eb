//! The `sluice` command's library half: the HTTP ingress, the admin API, the web console and
//! their clients, so tests can serve a host in-process and the binary stays thin.
#![warn(missing_docs)]

pub mod admin;
pub mod client;
pub mod cluster;
pub mod console;
pub mod ingress;
pub mod metrics_export;
pub mod otlp;
pub mod scaffold;
pub mod target;
