//! Actor addresses (`Type/key`) and the table of deployed actor types.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use sluice_flow::mailbox::MailboxStrategy;

use crate::actor::ActorCell;
use crate::bindings::ActorWorldPre;
use crate::config::{ChildSpec, WasiGrants};
use crate::error::ActorError;
use crate::state::StoreState;

/// A location-transparent actor address: `Type/key`. Never a host name.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ActorId {
    full: Arc<str>,
    split: usize,
}

impl ActorId {
    /// Parses and validates `Type/key`.
    pub fn parse(s: &str) -> Result<Self, ActorError> {
        let Some(split) = s.find('/') else {
            return Err(ActorError::invalid_argument(format!(
                "actor id {s:?} is not of the form Type/key"
            )));
        };
        validate_type_name(&s[..split]).map_err(ActorError::invalid_argument)?;
        let key = &s[split + 1..];
        if !is_short_printable(key) {
            return Err(ActorError::invalid_argument(format!(
                "actor key in {s:?} must be 1..=256 printable characters"
            )));
        }
        Ok(Self {
            full: Arc::from(s),
            split,
        })
    }

    /// Builds `Type/key` from parts.
    pub fn new(ty: &str, key: &str) -> Result<Self, ActorError> {
        Self::parse(&format!("{ty}/{key}"))
    }

    /// The actor type.
    pub fn actor_type(&self) -> &str {
        &self.full[..self.split]
    }

    /// The key within the type.
    pub fn key(&self) -> &str {
        &self.full[self.split + 1..]
    }

    /// The whole id.
    pub fn as_str(&self) -> &str {
        &self.full
    }
}

impl fmt::Display for ActorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.full)
    }
}

impl fmt::Debug for ActorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ActorId({})", self.full)
    }
}

/// 1..=256 bytes, none of them part of a control character (Unicode `Cc`: C0, DEL, C1).
/// The rule for actor keys and message types: bounded for storage and logs, free of line
/// breaks and escapes, otherwise any text.
fn is_short_printable(s: &str) -> bool {
    !s.is_empty() && s.len() <= 256 && !s.chars().any(char::is_control)
}

/// Message types follow the rule for keys: 1..=256 bytes without control characters.
/// Checked wherever a message type enters: the ingress, the `Host` API, and a guest's
/// tell, ask, schedule, tell-reliable and dispatch.
pub fn validate_msg_type(msg_type: &str) -> Result<(), ActorError> {
    if is_short_printable(msg_type) {
        return Ok(());
    }
    // Never echo an oversize value: its length says enough.
    let got = match msg_type.len() {
        0 => "an empty one".to_string(),
        n if n > 256 => format!("{n} bytes"),
        _ => format!("{msg_type:?}"),
    };
    Err(ActorError::invalid_argument(format!(
        "msg_type must be 1..=256 bytes without control characters, got {got}"
    )))
}

/// Actor type names: 1..=64 of `[A-Za-z0-9_.-]`.
pub fn validate_type_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
    {
        return Err(format!(
            "actor type {name:?} must be 1..=64 characters of [A-Za-z0-9_.-]"
        ));
    }
    Ok(())
}

/// One compiled version of a type's module. Replaced whole by a deploy.
pub(crate) struct ModuleVersion {
    pub version: u64,
    pub pre: ActorWorldPre<StoreState>,
    pub spec: ChildSpec,
    /// `spec.wasi`, shared by every activation's store.
    pub wasi: Arc<WasiGrants>,
    pub strategy: MailboxStrategy,
    pub init_json: String,
    pub memory_limit: usize,
}

/// A deployed actor type: its current module and its live activations.
pub(crate) struct ActorType {
    pub name: Arc<str>,
    module: RwLock<Arc<ModuleVersion>>,
    pub cells: Mutex<HashMap<Arc<str>, Arc<ActorCell>>>,
    pub metrics: TypeMetrics,
    next_version: AtomicU64,
    /// The version of `module`, readable without its lock (every turn checks it).
    current_version: AtomicU64,
    /// Admission cap on each activation's queued + running turns for arrivals; 0 = none.
    /// Set by every deploy (`max_queued`, else the host's `max_queued_per_actor`). Relaxed:
    /// a plain value read by the call path, publishing nothing else.
    pub max_queued: AtomicU64,
    /// Cap on this type's live instances (0 = only the host's); set by every deploy.
    pub max_activations: AtomicU32,
    /// Live instances of this type (each holds one pool slot).
    pub live: AtomicU32,
}

impl ActorType {
    pub fn new(name: &str, module: ModuleVersion) -> Self {
        Self {
            name: Arc::from(name),
            next_version: AtomicU64::new(module.version + 1),
            current_version: AtomicU64::new(module.version),
            module: RwLock::new(Arc::new(module)),
            cells: Mutex::new(HashMap::new()),
            metrics: TypeMetrics::new(name),
            max_queued: AtomicU64::new(0),
            max_activations: AtomicU32::new(0),
            live: AtomicU32::new(0),
        }
    }

    /// The module new activations (and instances after their current turn) use.
    pub fn current(&self) -> Arc<ModuleVersion> {
        self.module.read().clone()
    }

    /// Installs a new module; returns its version.
    pub fn replace(&self, mut module: ModuleVersion) -> u64 {
        // Relaxed: the version only needs to be unique; the RwLock publishes the module.
        module.version = self.next_version.fetch_add(1, Ordering::Relaxed);
        let v = module.version;
        *self.module.write() = Arc::new(module);
        // Release: a turn that sees `v` here finds the new module behind the lock.
        self.current_version.store(v, Ordering::Release);
        v
    }

    /// The version of [`current`](Self::current), without taking its lock or an `Arc`.
    pub fn current_version(&self) -> u64 {
        self.current_version.load(Ordering::Acquire)
    }
}

/// Metric handles resolved once per type so hot paths only increment.
pub(crate) struct TypeMetrics {
    pub refused: metrics::Counter,
    pub dropped_oldest: metrics::Counter,
    pub dropped_newest: metrics::Counter,
    pub turns_ok: metrics::Counter,
    pub turns_err: metrics::Counter,
    pub turns_skipped: metrics::Counter,
    /// Calls to this type that failed `DEADLINE_EXCEEDED`, by whether the turn never ran.
    pub deadline_skipped: metrics::Counter,
    pub deadline_running: metrics::Counter,
    pub turn_seconds: metrics::Histogram,
    pub queue_seconds: metrics::Histogram,
    pub traps: metrics::Counter,
    pub restarts: metrics::Counter,
    pub stopped: metrics::Counter,
    pub activations: metrics::Counter,
    pub deactivations: metrics::Counter,
    /// Idle activations deactivated to make room under `max_activations`.
    pub evictions: metrics::Counter,
}

impl TypeMetrics {
    fn new(ty: &str) -> Self {
        let t = ty.to_string();
        Self {
            refused: metrics::counter!("sluice_mailbox_refused_total", "actor_type" => t.clone()),
            dropped_oldest: metrics::counter!("sluice_mailbox_dropped_total", "actor_type" => t.clone(), "strategy" => "drop_oldest"),
            dropped_newest: metrics::counter!("sluice_mailbox_dropped_total", "actor_type" => t.clone(), "strategy" => "drop_newest"),
            turns_ok: metrics::counter!("sluice_turns_total", "actor_type" => t.clone(), "outcome" => "ok"),
            turns_err: metrics::counter!("sluice_turns_total", "actor_type" => t.clone(), "outcome" => "error"),
            turns_skipped: metrics::counter!("sluice_turns_skipped_total", "actor_type" => t.clone()),
            deadline_skipped: metrics::counter!("sluice_deadline_exceeded_total", "actor_type" => t.clone(), "skipped" => "true"),
            deadline_running: metrics::counter!("sluice_deadline_exceeded_total", "actor_type" => t.clone(), "skipped" => "false"),
            turn_seconds: metrics::histogram!("sluice_turn_seconds", "actor_type" => t.clone()),
            queue_seconds: metrics::histogram!("sluice_queue_seconds", "actor_type" => t.clone()),
            traps: metrics::counter!("sluice_actor_traps_total", "actor_type" => t.clone()),
            restarts: metrics::counter!("sluice_actor_restarts_total", "actor_type" => t.clone()),
            stopped: metrics::counter!("sluice_actor_stopped_total", "actor_type" => t.clone()),
            activations: metrics::counter!("sluice_actor_activations_total", "actor_type" => t.clone()),
            deactivations: metrics::counter!("sluice_actor_deactivations_total", "actor_type" => t.clone()),
            evictions: metrics::counter!("sluice_actor_evictions_total", "actor_type" => t),
        }
    }
}

/// All deployed types, by name.
#[derive(Default)]
pub(crate) struct Registry {
    types: RwLock<HashMap<String, Arc<ActorType>>>,
}

impl Registry {
    pub fn get(&self, name: &str) -> Option<Arc<ActorType>> {
        self.types.read().get(name).cloned()
    }

    pub fn insert_or_replace(&self, name: &str, module: ModuleVersion) -> (Arc<ActorType>, u64) {
        let mut types = self.types.write();
        if let Some(t) = types.get(name) {
            let v = t.replace(module);
            return (t.clone(), v);
        }
        let v = module.version;
        let t = Arc::new(ActorType::new(name, module));
        types.insert(name.to_string(), t.clone());
        (t, v)
    }

    pub fn all(&self) -> Vec<Arc<ActorType>> {
        self.types.read().values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actor_ids_parse_type_and_key() {
        let id = ActorId::parse("Worker/worker-7").unwrap();
        assert_eq!(id.actor_type(), "Worker");
        assert_eq!(id.key(), "worker-7");
        assert_eq!(ActorId::parse("Worker/a/b").unwrap().key(), "a/b");
    }

    #[test]
    fn bad_actor_ids_are_invalid_argument() {
        for bad in ["Worker", "/k", "Wor ker/k", "Worker/", "Worker/\n"] {
            let e = ActorId::parse(bad).unwrap_err();
            assert_eq!(e.code, crate::ErrorCode::InvalidArgument, "{bad:?}");
        }
    }

    #[test]
    fn msg_types_are_1_to_256_bytes_without_control_characters() {
        for ok in [
            "echo",
            "a",
            "orders.created",
            "with space/slash",
            "é",
            &"x".repeat(256),
        ] {
            assert_eq!(validate_msg_type(ok), Ok(()), "{ok:?}");
        }
        // 128 two-byte characters are 256 bytes; one more is over.
        assert_eq!(validate_msg_type(&"é".repeat(128)), Ok(()));
        for (bad, got) in [
            (String::new(), "an empty one".to_string()),
            ("x".repeat(257), "257 bytes".to_string()),
            ("é".repeat(129), "258 bytes".to_string()),
            ("a\nb".to_string(), r#""a\nb""#.to_string()),
            ("tab\t".to_string(), r#""tab\t""#.to_string()),
            ("nul\0".to_string(), r#""nul\0""#.to_string()),
            ("del\u{7f}".to_string(), r#""del\u{7f}""#.to_string()),
            ("c1\u{85}".to_string(), r#""c1\u{85}""#.to_string()),
        ] {
            let e = validate_msg_type(&bad).unwrap_err();
            assert_eq!(e.code, crate::ErrorCode::InvalidArgument, "{bad:?}");
            assert_eq!(
                e.to_string(),
                format!(
                    "INVALID_ARGUMENT: msg_type must be 1..=256 bytes without control characters, got {got}"
                )
            );
        }
    }
}
