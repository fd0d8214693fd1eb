//! The `[bus]` table: bounds, the IPC rate limiter and subscriptions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::LoadError;

/// How a subscription takes events off the bus.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SubscriptionMode {
    /// Its own per-principal queues under its own byte budget, drained in deficit
    /// round-robin order across principals: one principal's flood cannot crowd out the others.
    /// Over budget, the globally oldest event is evicted (counted). The default.
    #[default]
    Routed,
    /// A reader of the shared broadcast ring (`broadcast_capacity` slots): no per-principal
    /// isolation; a subscriber that falls behind skips ahead and counts what it lost.
    Broadcast,
    /// Routed intake, then one actor per principal: an event published by principal `p` is
    /// handled by `actor_type/p` (the subscription has no `key`). Each (actor type,
    /// principal) has its own dispatcher queue (`dispatch_queue_capacity`, default 64) and
    /// consumer, so one principal's events are handled one at a time in order while
    /// distinct principals run concurrently; a consumer idle for `dispatch_idle_ms` frees
    /// its queue; past `dispatch_max_queues_per_actor_type` queues, new principals share
    /// the `system` queue (still delivered to their own actor) and an audit line is logged.
    Dispatch,
}

impl SubscriptionMode {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Routed => "routed",
            Self::Broadcast => "broadcast",
            Self::Dispatch => "dispatch",
        }
    }
}

/// One `[[bus.subscriptions]]` entry: actor `actor_type/key` receives every event whose topic
/// matches `topic`, as a turn of its `handle` with msg-type = the event's topic.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Subscription {
    /// The receiving actor's type.
    pub actor_type: String,
    /// The receiving instance's key (the actor is activated on the first event). Empty for
    /// `dispatch` (the key is the publishing principal).
    #[serde(default)]
    pub key: String,
    /// Topic pattern: `a.b.c` exact, `a.*.c` one segment, `a.b.*` one or more trailing
    /// segments, at most 20 segments.
    pub topic: String,
    /// `routed` (default), `broadcast` or `dispatch`.
    #[serde(default)]
    pub mode: SubscriptionMode,
}

impl Subscription {
    /// A routed subscription of `actor_type/key` to `topic`.
    pub fn routed(actor_type: &str, key: &str, topic: &str) -> Self {
        Self {
            actor_type: actor_type.into(),
            key: key.into(),
            topic: topic.into(),
            mode: SubscriptionMode::Routed,
        }
    }

    /// A broadcast subscription of `actor_type/key` to `topic`.
    pub fn broadcast(actor_type: &str, key: &str, topic: &str) -> Self {
        Self {
            mode: SubscriptionMode::Broadcast,
            ..Self::routed(actor_type, key, topic)
        }
    }

    /// A dispatch subscription of `actor_type` to `topic`: principal `p`'s events go to
    /// `actor_type/p`.
    pub fn dispatch(actor_type: &str, topic: &str) -> Self {
        Self {
            mode: SubscriptionMode::Dispatch,
            ..Self::routed(actor_type, "", topic)
        }
    }

    /// The receiver as shown in stats: `Type/key`, or `Type/{principal}` for `dispatch`.
    pub fn receiver(&self) -> String {
        match self.mode {
            SubscriptionMode::Dispatch => format!("{}/{{principal}}", self.actor_type),
            _ => format!("{}/{}", self.actor_type, self.key),
        }
    }

    /// Rejects a bad pattern or receiver id with [`LoadError::Subscription`].
    pub fn validate(&self) -> Result<(), LoadError> {
        let err = |reason: String| LoadError::Subscription {
            actor_type: self.actor_type.clone(),
            topic: self.topic.clone(),
            reason,
        };
        if self.mode == SubscriptionMode::Dispatch {
            if !self.key.is_empty() {
                return Err(err(
                    "a dispatch subscription has no key: each principal's events go to the \
                     actor keyed by that principal"
                        .into(),
                ));
            }
            crate::id::validate_type_name(&self.actor_type).map_err(err)?;
        } else {
            crate::id::ActorId::new(&self.actor_type, &self.key).map_err(|e| err(e.to_string()))?;
        }
        sluice_bus::TopicPattern::parse(&self.topic).map_err(|e| err(e.to_string()))?;
        Ok(())
    }
}

/// The `[bus.rate_limit]` table: the IPC rate limiter applied to `bus.publish`, `tell` and
/// `outbox.dispatch` made by actors, per (calling actor type, principal), in bytes of payload
/// per 1-second window. Absent = no limiter (the call paths then pay one branch).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitSettings {
    /// Bytes per second for principals not listed in `quotas`. Default 10 MiB.
    pub default_quota_bytes_per_sec: u64,
    /// Per-principal quotas, bytes per second (`system` included).
    pub quotas: BTreeMap<String, u64>,
}

impl Default for RateLimitSettings {
    fn default() -> Self {
        Self {
            default_quota_bytes_per_sec: sluice_flow::ratelimit::DEFAULT_QUOTA_BYTES_PER_SEC,
            quotas: BTreeMap::new(),
        }
    }
}

impl RateLimitSettings {
    /// The limiter's config.
    pub fn to_config(&self) -> sluice_bus::RateLimitConfig {
        let mut c =
            sluice_bus::RateLimitConfig::default().default_quota(self.default_quota_bytes_per_sec);
        for (p, q) in &self.quotas {
            c = c.quota_override(p.clone(), *q);
        }
        c
    }
}

/// The `[bus]` table. Every field has a default; a host always has a bus (a publish with no
/// subscriber succeeds and reaches nobody).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct BusSettings {
    /// Slots of the shared broadcast ring. Default 1024.
    pub broadcast_capacity: usize,
    /// Byte budget of each routed subscription (payload + topic bytes). Default 1 MiB.
    pub route_budget_bytes: usize,
    /// Events one principal may hold in one routed subscription. Default 256.
    pub max_per_principal: usize,
    /// Floor of the DRR quantum, bytes. Default 4096.
    pub min_quantum_bytes: usize,
    /// Events of one subscription queued or running in the receiver's mailbox at once.
    /// The backlog beyond it waits in the subscription (fair, bounded, counted), not in the
    /// mailbox. Default 4.
    pub delivery_window: usize,
    /// Events one (actor type, principal) dispatcher queue holds (`dispatch` subscriptions);
    /// past it the event is dropped and counted. Default 64.
    pub dispatch_queue_capacity: usize,
    /// A dispatcher consumer idle this long frees its queue, ms. Default 60,000.
    pub dispatch_idle_ms: u64,
    /// Dispatcher queues per actor type; beyond it new principals share the `system`
    /// queue. Default 10,000.
    pub dispatch_max_queues_per_actor_type: usize,
    /// The IPC rate limiter; absent = none.
    pub rate_limit: Option<RateLimitSettings>,
    /// Who receives what.
    pub subscriptions: Vec<Subscription>,
}

impl Default for BusSettings {
    fn default() -> Self {
        Self {
            broadcast_capacity: sluice_bus::DEFAULT_BROADCAST_CAPACITY,
            route_budget_bytes: sluice_flow::drr::DEFAULT_BUDGET_BYTES,
            max_per_principal: sluice_flow::drr::DEFAULT_MAX_PER_PRINCIPAL,
            min_quantum_bytes: sluice_flow::drr::DEFAULT_MIN_QUANTUM_BYTES,
            delivery_window: 4,
            dispatch_queue_capacity: sluice_bus::DEFAULT_QUEUE_CAPACITY,
            dispatch_idle_ms: sluice_bus::DEFAULT_IDLE_GRACE.as_millis() as u64,
            dispatch_max_queues_per_actor_type: sluice_bus::DEFAULT_MAX_QUEUES_PER_ACTOR_TYPE,
            rate_limit: None,
            subscriptions: Vec::new(),
        }
    }
}

impl BusSettings {
    /// Adds a subscription.
    pub fn subscribe(mut self, s: Subscription) -> Self {
        self.subscriptions.push(s);
        self
    }

    /// Sets the IPC rate limiter.
    pub fn rate_limit(mut self, r: RateLimitSettings) -> Self {
        self.rate_limit = Some(r);
        self
    }

    /// Rejects settings that cannot work, and every bad subscription pattern.
    pub fn validate(&self) -> Result<(), LoadError> {
        let bad = |m: &str| Err(LoadError::Config(m.to_string()));
        if self.broadcast_capacity == 0 || self.broadcast_capacity > 1 << 20 {
            return bad("bus.broadcast_capacity must be in 1..=1048576");
        }
        if self.route_budget_bytes == 0 {
            return bad("bus.route_budget_bytes must be positive");
        }
        if self.max_per_principal == 0 {
            return bad("bus.max_per_principal must be positive");
        }
        if self.min_quantum_bytes == 0 {
            return bad("bus.min_quantum_bytes must be positive");
        }
        if self.delivery_window == 0 || self.delivery_window > 1024 {
            return bad("bus.delivery_window must be in 1..=1024");
        }
        if self.dispatch_queue_capacity == 0 || self.dispatch_queue_capacity > 1 << 16 {
            return bad("bus.dispatch_queue_capacity must be in 1..=65536");
        }
        if self.dispatch_idle_ms == 0 {
            return bad("bus.dispatch_idle_ms must be positive");
        }
        if self.dispatch_max_queues_per_actor_type == 0 {
            return bad("bus.dispatch_max_queues_per_actor_type must be positive");
        }
        for s in &self.subscriptions {
            s.validate()?;
        }
        Ok(())
    }
}
