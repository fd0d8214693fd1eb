//! What the console shows at one instant: one [`Frame`] a second, serialised as JSON for the
//! page (`host/cli/console/src/app.js` reads these field names).

use std::collections::BTreeMap;

use serde::Serialize;

/// Everything the console shows at one instant.
#[derive(Debug, Clone, Serialize)]
pub struct Frame {
    /// Unix time of the sample, milliseconds.
    pub t_ms: u64,
    /// Seconds since the previous frame (the rates' denominator).
    pub interval_s: f64,
    /// Turns running right now.
    pub inflight_turns: u64,
    /// Admission refusals since start, by scope.
    pub admission_refusals: BTreeMap<String, u64>,
    /// One row per actor type, by name.
    pub types: Vec<TypeFrame>,
    /// The outbox, when the host has one.
    pub outbox: Option<OutboxFrame>,
    /// One row per bus subscription.
    pub bus: Vec<SubscriptionFrame>,
    /// Deploys seen, newest first.
    pub deploys: Vec<Deploy>,
}

/// One actor type.
#[derive(Debug, Clone, Serialize)]
pub struct TypeFrame {
    /// Type name.
    pub actor_type: String,
    /// Module version (increments per deploy).
    pub version: u64,
    /// Live activations.
    pub active: usize,
    /// Messages queued across its mailboxes.
    pub queued: usize,
    /// Age of the oldest queued message, ms.
    pub oldest_queued_ms: u64,
    /// Activations stopped by their supervisor right now.
    pub stopped: usize,
    /// Turns per second over the last interval.
    pub turns_per_s: f64,
    /// Turns that returned an error, per second.
    pub errors_per_s: f64,
    /// Median turn time over the last interval, ms (`None` without turns).
    pub p50_ms: Option<f64>,
    /// 99th percentile turn time over the last interval, ms.
    pub p99_ms: Option<f64>,
    /// Messages refused by a full `error` mailbox, since start.
    pub refused: u64,
    /// The same, per second.
    pub refused_per_s: f64,
    /// Messages dropped by `drop_oldest` / `drop_newest`, since start.
    pub dropped: u64,
    /// Turns skipped because their deadline had passed, since start.
    pub skipped: u64,
    /// Restarts after a trap, since start.
    pub restarts: u64,
    /// Traps, since start.
    pub traps: u64,
    /// Actors stopped by their supervisor, since start.
    pub stopped_total: u64,
}

/// The outbox relay.
#[derive(Debug, Clone, Serialize)]
pub struct OutboxFrame {
    /// Pending depth and oldest age per partition.
    pub partitions: Vec<PartitionFrame>,
    /// One AIMD limiter per (partition, actor type).
    pub limiters: Vec<LimiterFrame>,
    /// Deliveries per second.
    pub delivered_per_s: f64,
    /// Retries scheduled per second.
    pub retries_per_s: f64,
    /// Capacity refusals per second.
    pub backpressure_per_s: f64,
    /// Dead letters per second.
    pub dead_lettered_per_s: f64,
    /// Deliveries since start.
    pub delivered: u64,
    /// Retries since start.
    pub retries: u64,
    /// Dead letters since start.
    pub dead_lettered: u64,
    /// Capacity refusals since start.
    pub backpressure: u64,
    /// Pending messages over every partition.
    pub pending: u64,
    /// The limiters' floor (`[outbox.concurrency] min_limit`).
    pub min_limit: u32,
    /// The limiters' ceiling.
    pub max_limit: u32,
}

/// One outbox partition.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionFrame {
    /// Partition index.
    pub partition: u32,
    /// Pending messages.
    pub depth: u64,
    /// Age of the oldest pending message, seconds.
    pub oldest_age_s: f64,
}

/// One AIMD limiter.
#[derive(Debug, Clone, Serialize)]
pub struct LimiterFrame {
    /// Partition index.
    pub partition: u32,
    /// Receiver actor type (`other` for types without a limiter of their own).
    pub actor_type: String,
    /// Current limit.
    pub limit: f64,
    /// Lowest limit during the interval (a halving shows even if it recovered).
    pub limit_min: f64,
    /// Deliveries in flight now.
    pub in_flight: f64,
    /// Most deliveries in flight during the interval.
    pub in_flight_max: f64,
}

/// One bus subscription.
#[derive(Debug, Clone, Serialize)]
pub struct SubscriptionFrame {
    /// Receiving actor, `Type/key`.
    pub actor: String,
    /// Topic pattern.
    pub topic: String,
    /// `routed`, `broadcast` or `dispatch`.
    pub mode: String,
    /// Events delivered since start.
    pub delivered: u64,
    /// Events dropped since start.
    pub dropped: u64,
    /// Events waiting.
    pub queued: usize,
    /// Budget bytes in use.
    pub bytes_in_use: usize,
    /// Principals with queued events.
    pub active_principals: usize,
    /// Events evicted since start.
    pub evicted: u64,
    /// Age of the oldest waiting event, ms.
    pub oldest_age_ms: Option<u64>,
    /// The principals holding the most bytes, largest first.
    pub top_principals: Vec<(String, usize)>,
}

/// One deploy the console saw.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Deploy {
    /// Actor type.
    pub actor_type: String,
    /// Version deployed.
    pub version: u64,
    /// Unix time it was first seen, ms (within one sample interval of the deploy).
    pub at_ms: u64,
    /// Already deployed when the console started (from the app folder).
    pub at_start: bool,
}
