//! A deployed actor type: its current module, its caps and counters, its metrics. What every
//! activation of the type shares (the map of its activations is the registry's).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use parking_lot::RwLock;

use super::module::ModuleVersion;
use crate::type_metrics::TypeMetrics;

/// The shared state of one actor type.
pub(crate) struct ActorType {
    pub name: Arc<str>,
    module: RwLock<Arc<ModuleVersion>>,
    pub metrics: TypeMetrics,
    next_version: AtomicU64,
    /// The version of `module`, readable without its lock (every turn checks it).
    current_version: AtomicU64,
    /// Admission cap on each activation's queued + running turns for arrivals; 0 = none.
    /// Set by every deploy (`max_queued`, else the host's `max_queued_per_actor`). Relaxed:
    /// a plain value read by the call path, publishing nothing else.
    pub max_queued: AtomicU64,
    /// Cap on this type's live activations (0 = only the host's); set by every deploy.
    pub max_activations: AtomicU32,
    /// Activation slots this type holds (see `slots.rs`).
    pub live: AtomicU32,
}

impl ActorType {
    pub fn new(name: &str, module: ModuleVersion) -> Self {
        Self {
            name: Arc::from(name),
            next_version: AtomicU64::new(module.version + 1),
            current_version: AtomicU64::new(module.version),
            module: RwLock::new(Arc::new(module)),
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
