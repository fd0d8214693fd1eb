//! Outbox configuration: the serde `[outbox]` table of app-config.toml, and a validating builder.

use serde::Deserialize;
use sluice_flow::backoff::{RetryBudgetConfig, RetryPolicy};
use sluice_flow::limiter::ConcurrencyConfig;

use crate::error::{Error, Result};

/// The `[outbox]` table. Every field has a default (seed 000's `OutboxConfig`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutboxConfig {
    /// AIMD limiter per (partition, actor type). Default initial 10 / min 1 / max 100.
    pub concurrency: ConcurrencyConfig,
    /// Backoff and `max_attempts`. Default 5 attempts, base 100 ms, cap 30 s.
    pub retry_policy: RetryPolicy,
    /// Retry budget per partition. Default 20 % of first attempts, 10/s floor, burst 100.
    pub retry_budget: RetryBudgetConfig,
    /// Idle poll interval of each partition worker, ms. Default 5. Enqueues wake the worker
    /// at once; the poll catches backed-off messages becoming visible.
    pub relay_interval_ms: u64,
    /// Most messages a partition's relay claims per cycle. The batch adapts below this cap: it
    /// starts at 16 (or the cap, if smaller), doubles while claims come back full and every
    /// row was attempted, and halves when claims come back short or rows were left for want
    /// of a permit (`sluice_outbox_relay_batch_size{partition}` shows it). Default 1000.
    pub relay_batch_size: u32,
    /// Number of partitions (FNV-1a of the receiver id). Default 4. Changing it only affects
    /// rows stored afterwards; existing rows keep their partition.
    pub partitions: u32,
    /// Lease of a claim, ms: a claimed row whose relay died is visible again after it.
    /// Default 30 000. Must exceed the longest delivery. (On SQLite, claims are held by the
    /// host process, so after a crash they are visible again at once on restart.)
    pub lease_ms: u64,
    /// Actor types that get their own limiter in each partition (bulkheads). Receivers of any
    /// other type share one limiter labelled `other`. Bounded by construction: it comes from
    /// config, so the `actor_type` metric label is bounded too.
    pub actor_types: Vec<String>,
    /// How often each partition worker refreshes its depth/age gauges, ms. Default 1000.
    pub stats_interval_ms: u64,
    /// How long acked rows are kept, ms (the APPEND deduplication window). Each relay worker
    /// deletes older ones of its partition every 30 s, at most 10 000 per pass.
    /// Default 3 600 000 (1 h). 0 keeps them forever.
    pub acked_retention_ms: u64,
}

impl Default for OutboxConfig {
    fn default() -> Self {
        Self {
            concurrency: ConcurrencyConfig::default(),
            retry_policy: RetryPolicy::default(),
            retry_budget: RetryBudgetConfig::default(),
            relay_interval_ms: 5,
            relay_batch_size: 1000,
            partitions: 4,
            lease_ms: 30_000,
            actor_types: Vec::new(),
            stats_interval_ms: 1000,
            acked_retention_ms: 3_600_000,
        }
    }
}

impl OutboxConfig {
    /// A builder starting from the defaults.
    pub fn builder() -> OutboxConfigBuilder {
        OutboxConfigBuilder(Self::default())
    }

    /// Check every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        self.concurrency
            .validate()
            .map_err(|e| Error::Config(format!("concurrency: {e}")))?;
        let checks: [(bool, &str); 6] = [
            (
                self.retry_policy.max_attempts >= 1,
                "retry_policy.max_attempts must be at least 1",
            ),
            (
                self.retry_policy.base_ms <= self.retry_policy.cap_ms,
                "retry_policy.base_ms must not exceed cap_ms",
            ),
            (
                self.relay_interval_ms >= 1,
                "relay_interval_ms must be at least 1",
            ),
            (
                (1..=10_000).contains(&self.relay_batch_size),
                "relay_batch_size must be in 1..=10000",
            ),
            (
                (1..=1024).contains(&self.partitions),
                "partitions must be in 1..=1024",
            ),
            (self.lease_ms >= 100, "lease_ms must be at least 100"),
        ];
        if let Some((_, msg)) = checks.iter().find(|(ok, _)| !ok) {
            return Err(Error::Config((*msg).to_string()));
        }
        if self.actor_types.len() > 256 {
            return Err(Error::Config("at most 256 actor_types (bulkheads)".into()));
        }
        if self
            .actor_types
            .iter()
            .any(|t| t.is_empty() || t.contains('/') || t == "other")
        {
            return Err(Error::Config(
                "actor_types must be non-empty, contain no '/', and not be 'other'".into(),
            ));
        }
        Ok(())
    }
}

/// Builder for [`OutboxConfig`]; `build` validates.
#[derive(Debug, Clone)]
pub struct OutboxConfigBuilder(OutboxConfig);

impl OutboxConfigBuilder {
    /// Limiter settings (default initial 10 / min 1 / max 100, AIMD).
    pub fn concurrency(mut self, c: ConcurrencyConfig) -> Self {
        self.0.concurrency = c;
        self
    }
    /// Retry policy (default 5 attempts, 100 ms base, 30 s cap).
    pub fn retry_policy(mut self, p: RetryPolicy) -> Self {
        self.0.retry_policy = p;
        self
    }
    /// Retry budget (default 20 %, 10/s, burst 100).
    pub fn retry_budget(mut self, b: RetryBudgetConfig) -> Self {
        self.0.retry_budget = b;
        self
    }
    /// Idle poll interval, ms (default 5).
    pub fn relay_interval_ms(mut self, ms: u64) -> Self {
        self.0.relay_interval_ms = ms;
        self
    }
    /// Cap of the adaptive claim batch (default 1000).
    pub fn relay_batch_size(mut self, n: u32) -> Self {
        self.0.relay_batch_size = n;
        self
    }
    /// Partition count (default 4).
    pub fn partitions(mut self, n: u32) -> Self {
        self.0.partitions = n;
        self
    }
    /// Claim lease, ms (default 30 000).
    pub fn lease_ms(mut self, ms: u64) -> Self {
        self.0.lease_ms = ms;
        self
    }
    /// Actor types with their own limiter (default none: all share `other`).
    pub fn actor_types<I, S>(mut self, types: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.0.actor_types = types.into_iter().map(Into::into).collect();
        self
    }
    /// Gauge refresh interval, ms (default 1000).
    pub fn stats_interval_ms(mut self, ms: u64) -> Self {
        self.0.stats_interval_ms = ms;
        self
    }
    /// Retention of acked rows, ms; 0 = forever (default 1 h).
    pub fn acked_retention_ms(mut self, ms: u64) -> Self {
        self.0.acked_retention_ms = ms;
        self
    }
    /// Validate and return the config.
    pub fn build(self) -> Result<OutboxConfig> {
        self.0.validate()?;
        Ok(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_seed() {
        let c = OutboxConfig::default();
        assert_eq!(c.relay_interval_ms, 5);
        // The seed's fixed 20 is now where the adaptive batch starts (16); 1000 is its cap.
        assert_eq!(c.relay_batch_size, 1000);
        assert_eq!(c.concurrency.initial_limit, 10);
        assert_eq!(c.retry_policy.max_attempts, 5);
        c.validate().unwrap();
    }

    #[test]
    fn builder_refuses_bad_values() {
        assert!(OutboxConfig::builder().partitions(0).build().is_err());
        assert!(OutboxConfig::builder().relay_batch_size(0).build().is_err());
        assert!(
            OutboxConfig::builder()
                .actor_types(["a/b"])
                .build()
                .is_err()
        );
        assert!(OutboxConfig::builder().partitions(8).build().is_ok());
    }
}

#[cfg(test)]
mod toml_tests {
    use super::*;

    #[test]
    fn outbox_table_parses_with_defaults_for_missing_fields() {
        #[derive(Deserialize)]
        struct App {
            outbox: OutboxConfig,
        }
        let app: App = toml::from_str(
            r#"
            [outbox]
            relay_batch_size = 50
            partitions = 8
            actor_types = ["Worker", "ConfigServer"]
            [outbox.concurrency]
            max_limit = 50
            strategy = "aimd"
            [outbox.retry_policy]
            max_attempts = 7
            "#,
        )
        .unwrap();
        let c = app.outbox;
        assert_eq!(
            (c.relay_batch_size, c.partitions, c.relay_interval_ms),
            (50, 8, 5)
        );
        assert_eq!(
            (c.concurrency.initial_limit, c.concurrency.max_limit),
            (10, 50)
        );
        assert_eq!(
            (c.retry_policy.max_attempts, c.retry_policy.base_ms),
            (7, 100)
        );
        c.validate().unwrap();
        assert!(
            toml::from_str::<App>("[outbox]\nbogus = 1").is_err(),
            "unknown keys are refused"
        );
    }
}
