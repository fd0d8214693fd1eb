//! One `[[supervisor.children]]` entry: an actor type, its module, its limits and grants.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sluice_flow::mailbox::MailboxStrategy;

use super::limits::{self as range, MAX_ACTIVATIONS, MAX_MEMORY_LIMIT_MB};
use crate::error::LoadError;

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

    /// Whether `key` is one of [`ChildSpec::eager_keys`] (allocates nothing).
    pub fn is_eager_key(&self, key: &str) -> bool {
        let counted = key
            .parse::<u32>()
            .is_ok_and(|i| i < self.count.unwrap_or(0) && i.to_string() == key);
        counted || self.keys.iter().any(|k| k == key)
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

    /// Rejects specs that cannot work: a valid type name, a known strategy, every number in
    /// its range. (Whether its supervised instances fit the host's caps is checked at deploy,
    /// where the other types are known.)
    pub fn validate(&self) -> Result<(), LoadError> {
        crate::id::validate_type_name(&self.actor_type)
            .map_err(|e| LoadError::Config(format!("{}: {e}", self.name)))?;
        let field = |f: &str| format!("{}.{f}", self.name);
        range::check(
            &field("mailbox_capacity"),
            self.mailbox_capacity,
            1..=1_000_000,
        )?;
        range::check_opt(&field("max_queued"), self.max_queued, 1..=10_000_000)?;
        range::check_opt(
            &field("max_activations"),
            self.max_activations,
            1..=MAX_ACTIVATIONS,
        )?;
        range::check_opt(&field("count"), self.count, 0..=MAX_ACTIVATIONS)?;
        range::check(
            &field("keys"),
            self.keys.len(),
            0..=MAX_ACTIVATIONS as usize,
        )?;
        range::check(&field("max_restarts"), self.max_restarts, 0..=1_000_000)?;
        range::check(
            &field("restart_window_ms"),
            self.restart_window_ms,
            1..=86_400_000,
        )?;
        range::check_opt(
            &field("memory_limit_mb"),
            self.memory_limit_mb,
            1..=MAX_MEMORY_LIMIT_MB,
        )?;
        if let Some(cap) = self.max_activations {
            let eager = self.eager_keys().len();
            if eager > cap as usize {
                return Err(LoadError::Config(format!(
                    "{}: {eager} supervised instances (count/keys) cannot fit max_activations={cap}",
                    self.name
                )));
            }
        }
        for k in &self.keys {
            crate::id::ActorId::new(&self.actor_type, k)
                .map_err(|e| LoadError::Config(format!("{}.keys: {e}", self.name)))?;
        }
        self.strategy()?;
        Ok(())
    }
}
