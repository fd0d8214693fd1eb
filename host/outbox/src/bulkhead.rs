//! Bulkheads: one AIMD limiter per (partition, actor type), and the metric handles of each
//! partition, registered once so the hot path does no label formatting.

use std::collections::HashMap;

use metrics::{Counter, Gauge, Histogram};
use sluice_flow::limiter::{ConcurrencyConfig, ConcurrencyLimiter};

use crate::error::{Error, Result};

/// Label of the limiter shared by actor types not listed in `OutboxConfig::actor_types`.
pub const OTHER_TYPE: &str = "other";

/// One actor type's limiter in one partition.
#[derive(Debug)]
pub(crate) struct Bulkhead {
    pub limiter: ConcurrencyLimiter,
    pub limit_gauge: Gauge,
    pub in_flight_gauge: Gauge,
    pub acquire_rejected: Counter,
    /// Successful deliveries (each one an additive-increase signal, even at the maximum).
    pub success: Counter,
    /// Capacity refusals that cut it (multiplicative decrease).
    pub rejection: Counter,
}

impl Bulkhead {
    /// Publishes the limit and the deliveries in flight (whenever a permit is taken or a
    /// delivery settles).
    pub fn publish_limit(&self) {
        self.limit_gauge
            .set(f64::from(self.limiter.current_limit()));
        self.in_flight_gauge
            .set(f64::from(self.limiter.in_flight()));
    }
}

/// Counters of one partition's relay (labels: `partition`, and `reason` for dead letters).
#[derive(Debug)]
pub(crate) struct PartitionMetrics {
    pub delivered: Counter,
    pub retries: Counter,
    pub backpressure: Counter,
    pub errors: Counter,
    pub dead_max_attempts: Counter,
    pub dead_permanent: Counter,
    pub dead_expired: Counter,
    pub budget_exhausted: Counter,
    pub delivery_seconds: Histogram,
    pub queue_depth: Gauge,
    pub oldest_age: Gauge,
    /// Rows the partition's relay claims per cycle now (adaptive, see `batch.rs`).
    pub batch_size: Gauge,
    /// 1 while this host's relay worker holds the partition.
    pub relayed: Gauge,
}

impl PartitionMetrics {
    fn new(p: u32) -> Self {
        let part = p.to_string();
        let dead = |reason: &'static str| {
            metrics::counter!("sluice_outbox_relay_dead_lettered_total",
                "partition" => part.clone(), "reason" => reason)
        };
        Self {
            delivered: metrics::counter!("sluice_outbox_relay_delivered_total", "partition" => part.clone()),
            retries: metrics::counter!("sluice_outbox_relay_retries_total", "partition" => part.clone()),
            backpressure: metrics::counter!("sluice_outbox_relay_backpressure_total", "partition" => part.clone()),
            errors: metrics::counter!("sluice_outbox_relay_errors_total", "partition" => part.clone()),
            dead_max_attempts: dead(crate::message::dead_reason::MAX_ATTEMPTS),
            dead_permanent: dead(crate::message::dead_reason::PERMANENT),
            dead_expired: dead(crate::message::dead_reason::EXPIRED),
            budget_exhausted: metrics::counter!("sluice_outbox_relay_retry_budget_exhausted_total", "partition" => part.clone()),
            delivery_seconds: metrics::histogram!("sluice_outbox_relay_delivery_seconds", "partition" => part.clone()),
            queue_depth: metrics::gauge!("sluice_outbox_queue_depth", "partition" => part.clone()),
            oldest_age: metrics::gauge!("sluice_outbox_oldest_pending_age_seconds", "partition" => part.clone()),
            batch_size: metrics::gauge!("sluice_outbox_relay_batch_size", "partition" => part.clone()),
            relayed: metrics::gauge!("sluice_outbox_partition_relayed", "partition" => part),
        }
    }

    pub fn dead(&self, reason: &str) -> &Counter {
        match reason {
            crate::message::dead_reason::EXPIRED => &self.dead_expired,
            crate::message::dead_reason::PERMANENT => &self.dead_permanent,
            _ => &self.dead_max_attempts,
        }
    }
}

/// Everything per partition that is shared by dispatch and the partition's relay worker.
#[derive(Debug)]
pub(crate) struct Partition {
    by_type: HashMap<String, usize>,
    bulkheads: Vec<Bulkhead>,
    pub metrics: PartitionMetrics,
}

impl Partition {
    pub fn new(p: u32, config: &ConcurrencyConfig, actor_types: &[String]) -> Result<Self> {
        let mut by_type = HashMap::new();
        let mut bulkheads = Vec::new();
        let names = actor_types.iter().map(String::as_str).chain([OTHER_TYPE]);
        for name in names {
            if by_type.contains_key(name) {
                continue;
            }
            let limiter = ConcurrencyLimiter::new(*config)
                .map_err(|e| Error::Config(format!("concurrency: {e}")))?;
            let labels = [
                ("partition", p.to_string()),
                ("actor_type", name.to_string()),
            ];
            let b = Bulkhead {
                limiter,
                limit_gauge: metrics::gauge!("sluice_outbox_limiter_current_limit", &labels),
                in_flight_gauge: metrics::gauge!("sluice_outbox_limiter_in_flight", &labels),
                acquire_rejected: metrics::counter!(
                    "sluice_outbox_limiter_acquire_rejected_total",
                    &labels
                ),
                success: metrics::counter!("sluice_outbox_limiter_success_total", &labels),
                rejection: metrics::counter!("sluice_outbox_limiter_rejection_total", &labels),
            };
            b.publish_limit();
            by_type.insert(name.to_string(), bulkheads.len());
            bulkheads.push(b);
        }
        Ok(Self {
            by_type,
            bulkheads,
            metrics: PartitionMetrics::new(p),
        })
    }

    /// The bulkhead of `actor_type` (the shared `other` one for unlisted types).
    pub fn bulkhead(&self, actor_type: &str) -> &Bulkhead {
        let i = self
            .by_type
            .get(actor_type)
            .or_else(|| self.by_type.get(OTHER_TYPE))
            .copied()
            .unwrap_or(0);
        &self.bulkheads[i]
    }

    /// (actor type, current limit) of every bulkhead.
    pub fn limits(&self) -> Vec<(String, u32)> {
        let mut v: Vec<(String, u32)> = self
            .by_type
            .iter()
            .map(|(t, i)| (t.clone(), self.bulkheads[*i].limiter.current_limit()))
            .collect();
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics_util::debugging::DebuggingRecorder;

    #[test]
    fn metrics_use_the_sluice_prefix_and_bounded_labels_only() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let part = metrics::with_local_recorder(&recorder, || {
            Partition::new(3, &ConcurrencyConfig::default(), &["Worker".to_string()]).unwrap()
        });
        // Unknown types share the `other` bulkhead: no per-receiver or per-type explosion.
        assert!(std::ptr::eq(
            part.bulkhead("Nope"),
            part.bulkhead(OTHER_TYPE)
        ));
        assert!(!std::ptr::eq(
            part.bulkhead("Worker"),
            part.bulkhead(OTHER_TYPE)
        ));
        let snapshot = snapshotter.snapshot().into_vec();
        assert!(!snapshot.is_empty());
        for (key, ..) in snapshot {
            let key = key.key();
            assert!(key.name().starts_with("sluice_outbox_"), "{}", key.name());
            for label in key.labels() {
                assert!(
                    ["partition", "actor_type", "reason"].contains(&label.key()),
                    "unexpected label {} on {}",
                    label.key(),
                    key.name()
                );
            }
        }
    }
}
