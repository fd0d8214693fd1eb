//! Configuration in two layers: serde structs for the app file's tables (the app crate reads
//! the file) and builders for code, each with documented defaults and a `validate`.

mod bus;
mod child;
mod limits;

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::error::LoadError;

pub use bus::{BusSettings, RateLimitSettings, Subscription, SubscriptionMode};
pub use child::{ChildSpec, WasiGrants};
pub use limits::{MAX_ACTIVATIONS, MAX_MEMORY_LIMIT_MB, MAX_PAYLOAD_BYTES};

use limits as range;

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
    /// Most turns one guest call runs for a guest that exports batched turns (`batch` in
    /// `batched-actor-world`). Adaptive below it: a batch takes the messages queued when each
    /// turn ends, so an actor with one message runs one turn. 1 = a call per message for every
    /// guest. Default 32.
    pub max_batch_turns: u32,
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
    /// Pending durable reminders (`outbox.remind`) per actor, counted in the outbox; arming
    /// one more is refused `RESOURCE_EXHAUSTED` (re-arming a pending name is not one more).
    /// Default 1024.
    pub max_reminders_per_actor: u32,
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
    /// app config sets it from its `[bus]` table (`sluice_app::AppConfig::bus`); code sets it here.
    #[serde(skip)]
    pub bus: BusSettings,
}

impl Default for HostConfig {
    fn default() -> Self {
        Self {
            max_activations: 1000,
            memory_limit_mb: 128,
            max_turn_ms: 10_000,
            max_batch_turns: 32,
            idle_deactivate_ms: 300_000,
            call_timeout_ms: 30_000,
            max_payload_bytes: 5 * 1024 * 1024,
            max_timers_per_actor: 1024,
            max_reminders_per_actor: 1024,
            max_queued_per_actor: 0,
            max_inflight_turns: 0,
            cache_dir: None,
            bus: BusSettings::default(),
        }
    }
}

const HOUR_MS: u64 = 3_600_000;
const DAY_MS: u64 = 24 * HOUR_MS;

impl HostConfig {
    /// Rejects settings that cannot work: every number has a range.
    pub fn validate(&self) -> Result<(), LoadError> {
        if self.max_activations == 0 || self.max_activations > MAX_ACTIVATIONS {
            return Err(LoadError::Config(format!(
                "host.max_activations must be in 1..={MAX_ACTIVATIONS} (each live actor reserves ~8 GiB of address space), got {}",
                self.max_activations
            )));
        }
        range::check(
            "host.memory_limit_mb",
            self.memory_limit_mb,
            1..=MAX_MEMORY_LIMIT_MB,
        )?;
        range::check("host.max_turn_ms", self.max_turn_ms, 1..=HOUR_MS)?;
        range::check("host.max_batch_turns", self.max_batch_turns, 1..=4096)?;
        range::check(
            "host.idle_deactivate_ms",
            self.idle_deactivate_ms,
            0..=7 * DAY_MS,
        )?;
        range::check("host.call_timeout_ms", self.call_timeout_ms, 0..=DAY_MS)?;
        range::check(
            "host.max_payload_bytes",
            self.max_payload_bytes,
            1..=MAX_PAYLOAD_BYTES,
        )?;
        range::check(
            "host.max_timers_per_actor",
            self.max_timers_per_actor,
            1..=1_000_000,
        )?;
        range::check(
            "host.max_reminders_per_actor",
            self.max_reminders_per_actor,
            1..=1_000_000,
        )?;
        range::check(
            "host.max_queued_per_actor",
            self.max_queued_per_actor,
            0..=10_000_000,
        )?;
        range::check(
            "host.max_inflight_turns",
            self.max_inflight_turns,
            0..=100_000_000,
        )?;
        self.bus.validate()
    }

    /// The default call deadline, if enabled.
    pub fn call_timeout(&self) -> Option<Duration> {
        (self.call_timeout_ms > 0).then(|| Duration::from_millis(self.call_timeout_ms))
    }
}
