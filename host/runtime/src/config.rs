//! Configuration in two layers: serde structs for `app-config.toml`, and [`HostConfig`] with
//! documented defaults for code.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sluice_flow::mailbox::MailboxStrategy;

use crate::error::LoadError;

/// Host-wide settings. Every field has a default; [`HostConfig::validate`] checks bounds.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HostConfig {
    /// Live instances this host keeps at most (pool size). Default 1000. When reached, the least
    /// recently used idle activation (never one mid-turn, never a supervised eager one) is
    /// deactivated to make room; with none idle, activation fails `RESOURCE_EXHAUSTED`.
    pub max_activations: u32,
    /// Linear-memory ceiling per actor instance, MiB, unless the child sets its own. Default 128.
    pub memory_limit_mb: u64,
    /// Wall time one turn may run (excluding awaits on `ask`) before it is interrupted. Default 10 s.
    pub max_turn_ms: u64,
    /// An idle keyed actor is deactivated after this long; 0 = never. Default 5 minutes.
    pub idle_deactivate_ms: u64,
    /// Default deadline stamped on external calls and on turns an actor starts on its own
    /// clock (timer deliveries); relayed down every call chain. 0 disables the default
    /// (explicit per-call deadlines still apply). Default 30 s.
    pub call_timeout_ms: u64,
    /// Largest payload accepted by tell/ask/dispatch/publish. Default 5 MiB.
    pub max_payload_bytes: usize,
    /// Pending `schedule` timers per actor. Default 1024.
    pub max_timers_per_actor: usize,
    /// Admission cap per actor unless its child sets `max_queued`: an arrival is refused
    /// `OVERLOADED` (scope `actor`) when the actor's queued + running turns reach it.
    /// 0 = unlimited (default). Size it ≈ `call_timeout_ms / p50 turn ms`.
    pub max_queued_per_actor: u64,
    /// Admission cap on turns host-wide, queued + running across every actor: an arrival is
    /// refused `OVERLOADED` (scope `host`) at it. 0 = unlimited (default).
    pub max_inflight_turns: u64,
    /// Where compiled components are cached. Default: none (compile in memory every start).
    pub cache_dir: Option<PathBuf>,
    /// The event bus: bounds, IPC rate limits and subscriptions. Not part of `[host]`: an
    /// app config sets it from its `[bus]` table ([`AppConfig::bus`]); code sets it here.
    #[serde(skip)]
    pub bus: BusSettings,
}

impl Default for HostConfig {
    fn default() -> Self {
        Self {
            max_activations: 1000,
            memory_limit_mb: 128,
            max_turn_ms: 10_000,
            idle_deactivate_ms: 300_000,
            call_timeout_ms: 30_000,
            max_payload_bytes: 5 * 1024 * 1024,
            max_timers_per_actor: 1024,
            max_queued_per_actor: 0,
            max_inflight_turns: 0,
            cache_dir: None,
            bus: BusSettings::default(),
        }
    }
}

/// The largest `max_activations` one host may ask for (see [`HostConfig::validate`]).
pub const MAX_ACTIVATIONS: u32 = 8_000;

impl HostConfig {
    /// Rejects settings that cannot work.
    pub fn validate(&self) -> Result<(), LoadError> {
        let bad = |m: &str| Err(LoadError::Config(m.to_string()));
        // Each pool slot reserves ~8 GiB of address space (two 4 GiB linear-memory
        // reservations, which let wasmtime drop bounds checks); a process has ~128 TiB.
        if self.max_activations == 0 || self.max_activations > MAX_ACTIVATIONS {
            return bad(&format!(
                "host.max_activations must be in 1..={MAX_ACTIVATIONS} (each live actor reserves ~8 GiB of address space)"
            ));
        }
        if self.memory_limit_mb == 0 || self.memory_limit_mb > 4096 {
            return bad("host.memory_limit_mb must be in 1..=4096");
        }
        if self.max_turn_ms == 0 {
            return bad("host.max_turn_ms must be positive");
        }
        if self.max_payload_bytes == 0 {
            return bad("host.max_payload_bytes must be positive");
        }
        self.bus.validate()
    }

    /// The default call deadline, if enabled.
    pub fn call_timeout(&self) -> Option<Duration> {
        (self.call_timeout_ms > 0).then(|| Duration::from_millis(self.call_timeout_ms))
    }
}

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
            crate::registry::validate_type_name(&self.actor_type).map_err(err)?;
        } else {
            crate::registry::ActorId::new(&self.actor_type, &self.key)
                .map_err(|e| err(e.to_string()))?;
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

/// What a guest may touch beyond the host imports. Everything is off by default.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct WasiGrants {
    /// Inherit the host's stdout/stderr.
    pub stdio: bool,
    /// Environment variables visible to the guest.
    pub env: BTreeMap<String, String>,
    /// Host directories to preopen: guest path → host path (read-only).
    pub dirs: BTreeMap<String, PathBuf>,
}

/// One `[[supervisor.children]]` entry: an actor type, its module and its limits.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ChildSpec {
    /// A name for logs and the admin API.
    pub name: String,
    /// The type part of actor ids (`Type/key`).
    pub actor_type: String,
    /// Path to the component, relative to the app folder.
    pub module: PathBuf,
    /// Ordinary messages an instance's mailbox holds. Default 1024.
    #[serde(default = "default_capacity")]
    pub mailbox_capacity: usize,
    /// `error` (default), `drop_oldest` or `drop_newest`.
    #[serde(default = "default_strategy")]
    pub mailbox_strategy: String,
    /// Admission cap on this type's queues; none = the host's `max_queued_per_actor`.
    #[serde(default)]
    pub max_queued: Option<u64>,
    /// Most live instances of this type; when reached, the type's least recently used idle
    /// activation is deactivated to make room. None = only the host's `max_activations`.
    #[serde(default)]
    pub max_activations: Option<u32>,
    /// Eagerly activated, supervised instances `Type/0` … `Type/(count-1)`.
    #[serde(default)]
    pub count: Option<u32>,
    /// Eagerly activated, supervised instances with these keys.
    #[serde(default)]
    pub keys: Vec<String>,
    /// Restart intensity: at most this many restarts …
    #[serde(default = "default_max_restarts")]
    pub max_restarts: u32,
    /// … within this window, else the instance is stopped. Default 5 in 10 s.
    #[serde(default = "default_restart_window")]
    pub restart_window_ms: u64,
    /// Memory ceiling for this type, MiB.
    #[serde(default)]
    pub memory_limit_mb: Option<u64>,
    /// Passed to the actor's `init` as JSON.
    #[serde(default)]
    pub init: Option<toml::Table>,
    /// WASI capabilities granted to this type.
    #[serde(default)]
    pub wasi: WasiGrants,
}

fn default_capacity() -> usize {
    1024
}
fn default_strategy() -> String {
    "error".into()
}
fn default_max_restarts() -> u32 {
    5
}
fn default_restart_window() -> u64 {
    10_000
}

impl ChildSpec {
    /// A spec with defaults for `actor_type` loaded from `module`.
    pub fn new(actor_type: &str, module: impl Into<PathBuf>) -> Self {
        Self {
            name: actor_type.to_lowercase(),
            actor_type: actor_type.to_string(),
            module: module.into(),
            mailbox_capacity: default_capacity(),
            mailbox_strategy: default_strategy(),
            max_queued: None,
            max_activations: None,
            count: None,
            keys: Vec::new(),
            max_restarts: default_max_restarts(),
            restart_window_ms: default_restart_window(),
            memory_limit_mb: None,
            init: None,
            wasi: WasiGrants::default(),
        }
    }

    /// Sets the mailbox bound and strategy.
    pub fn mailbox(mut self, capacity: usize, strategy: MailboxStrategy) -> Self {
        self.mailbox_capacity = capacity;
        self.mailbox_strategy = strategy.as_str().to_string();
        self
    }

    /// Sets the restart intensity.
    pub fn restarts(mut self, max: u32, window: Duration) -> Self {
        self.max_restarts = max;
        self.restart_window_ms = window.as_millis() as u64;
        self
    }

    /// Sets this type's admission cap (queued + running per actor; 0 = unlimited).
    pub fn max_queued(mut self, cap: u64) -> Self {
        self.max_queued = Some(cap);
        self
    }

    /// Sets the memory ceiling.
    pub fn memory_limit_mb(mut self, mb: u64) -> Self {
        self.memory_limit_mb = Some(mb);
        self
    }

    /// Caps this type's live instances (LRU idle ones make room).
    pub fn max_activations(mut self, cap: u32) -> Self {
        self.max_activations = Some(cap);
        self
    }

    /// Sets eager instances `Type/0..count`.
    pub fn count(mut self, n: u32) -> Self {
        self.count = Some(n);
        self
    }

    /// Sets the `init` config.
    pub fn init(mut self, table: toml::Table) -> Self {
        self.init = Some(table);
        self
    }

    /// Parsed mailbox strategy.
    pub fn strategy(&self) -> Result<MailboxStrategy, LoadError> {
        MailboxStrategy::parse(&self.mailbox_strategy).ok_or_else(|| {
            LoadError::Config(format!(
                "{}: mailbox_strategy must be error, drop_oldest or drop_newest, not {:?}",
                self.name, self.mailbox_strategy
            ))
        })
    }

    /// The keys activated eagerly and kept alive.
    pub fn eager_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = (0..self.count.unwrap_or(0))
            .map(|i| i.to_string())
            .collect();
        keys.extend(self.keys.iter().cloned());
        keys
    }

    /// The `init` table as a JSON string (`{}` when absent).
    pub fn init_json(&self) -> String {
        match &self.init {
            Some(t) => serde_json::to_string(t).unwrap_or_else(|_| "{}".into()),
            None => "{}".into(),
        }
    }

    /// Rejects specs that cannot work.
    pub fn validate(&self) -> Result<(), LoadError> {
        crate::registry::validate_type_name(&self.actor_type)
            .map_err(|e| LoadError::Config(format!("{}: {e}", self.name)))?;
        if self.mailbox_capacity == 0 {
            return Err(LoadError::Config(format!(
                "{}: mailbox_capacity must be positive",
                self.name
            )));
        }
        self.strategy()?;
        Ok(())
    }
}
