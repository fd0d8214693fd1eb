//! Shared test support: a real nats-server per test (sluice_cluster::testing), connections as
//! distinct hosts, and the suites' bounded wait (`sluice-test-wait`).
#![allow(dead_code)]

use sluice_cluster::testing::NatsServer;
use sluice_cluster::{ClusterConfig, Connection, connect};

/// A fresh nats-server with JetStream. Fails (never skips) when the binary is missing.
pub async fn nats() -> NatsServer {
    NatsServer::start().await.unwrap_or_else(|e| panic!("{e}"))
}

/// A config for `node` in cluster `cluster` on `url`, heartbeat 100 ms, TTL `ttl_ms`.
pub fn config(url: &str, cluster: &str, node: &str, ttl_ms: u64) -> ClusterConfig {
    ClusterConfig::builder(url)
        .name(cluster)
        .node_id(node)
        .heartbeat_ms(100)
        .member_ttl_ms(ttl_ms)
        .connect_timeout_ms(2_000)
        .build()
        .expect("test config is valid")
}

/// A connection of host `node`.
pub async fn host(url: &str, cluster: &str, node: &str, ttl_ms: u64) -> Connection {
    connect(&config(url, cluster, node, ttl_ms))
        .await
        .unwrap_or_else(|e| panic!("connect {node}: {e}"))
}

#[allow(unused_imports)] // not every suite waits
pub use sluice_test_wait::{wait_for, wait_until_async};
