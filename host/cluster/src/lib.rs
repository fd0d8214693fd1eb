//! Many Sluice hosts acting as one over NATS.
//!
//! NATS does the distributed parts; this crate writes no consensus, gossip or RPC protocol of
//! its own:
//!
//! | concern | NATS part | module |
//! |---|---|---|
//! | configuration (`[cluster]`) | | [`config`] |
//! | connecting, state events | core | [`connect`] |
//! | who is in the cluster | JetStream KV, entries expiring after the member TTL | [`membership`] |
//! | where an actor should go | (pure) rendezvous hashing | [`placement`] |
//! | where an actor runs, at most one place | JetStream KV, create-only / compare-and-set | [`directory`] |
//! | remote tell/ask | core request/reply, a subject per host | [`transport`] |
//! | module versions | JetStream object store + KV | [`modules`] |
//! | the bus across hosts | core publish/subscribe, a subject per topic | [`bus`] |
//! | metrics | | [`metrics`] |
//!
//! The crate does not depend on the runtime: the runtime's routing seam calls into it (the
//! dependency direction is cli → cluster → runtime; the runtime never knows NATS). See
//! docs/cluster.md for the design, its behaviour at scale and the single-activation argument.
#![warn(missing_docs)]

mod buckets;
pub mod bus;
pub mod config;
pub mod connect;
pub mod directory;
pub mod membership;
pub mod metrics;
pub mod modules;
pub mod names;
pub mod placement;
pub mod testing;
pub mod transport;

pub use buckets::BucketError;
pub use config::{ClusterConfig, ConfigError, TlsConfig};
pub use connect::{ConnectError, Connection, ConnectionEvent, ConnectionState, connect};
