//! What every activation shares with its host: the engine, the settings, the slot count, the
//! gauges a host reads, and a handle on the host services guests call.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use wasmtime::Engine;

use super::slots::Slots;
use crate::activations::ActivationHooks;
use crate::config::HostConfig;
use crate::guest::GuestHost;

/// The activation side of a host.
pub(crate) struct Env {
    pub engine: Engine,
    pub config: HostConfig,
    /// Activation slots taken host-wide, at most `max_activations`.
    pub slots: Arc<Slots>,
    /// Turns running now, host-wide. Relaxed: a gauge, not a lock.
    pub inflight: AtomicU64,
    shutting_down: AtomicBool,
    /// The host's services, set once the host exists (weak: the host owns this).
    services: OnceLock<Weak<dyn GuestHost>>,
    /// Who may start an activation (a cluster's single-activation rule), once set.
    activations: OnceLock<Arc<dyn ActivationHooks>>,
    /// Set while the hooks' owner has lost the right to run its actors (a cluster member
    /// whose lease lapsed): every activation under the hooks ends, mid-turn if need be.
    /// Shared with each such instance's epoch callback.
    pub fenced: Arc<AtomicBool>,
}

impl Env {
    pub fn new(engine: Engine, config: HostConfig) -> Self {
        Self {
            engine,
            config,
            slots: Arc::new(Slots::default()),
            inflight: AtomicU64::new(0),
            shutting_down: AtomicBool::new(false),
            services: OnceLock::new(),
            activations: OnceLock::new(),
            fenced: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Sets the services guests of this host call (once).
    pub fn set_services(&self, services: Weak<dyn GuestHost>) {
        let _ = self.services.set(services);
    }

    /// The services guests call; `None` once the host is gone.
    pub fn services(&self) -> Option<Arc<dyn GuestHost>> {
        self.services.get()?.upgrade()
    }

    /// Installs the activation hooks (once); `false` when some were installed before.
    pub fn set_activations(&self, hooks: Arc<dyn ActivationHooks>) -> bool {
        self.activations.set(hooks).is_ok()
    }

    /// The installed activation hooks, if any.
    pub fn activations(&self) -> Option<&Arc<dyn ActivationHooks>> {
        self.activations.get()
    }

    /// Whether activations of `eager` (supervised) or keyed actors go through the hooks.
    pub fn hooked(&self, eager: bool) -> bool {
        self.activations()
            .is_some_and(|h| !eager || h.places_supervised())
    }

    /// Whether an activation (of `eager` or keyed actors) must end now: see [`Env::fenced`].
    pub fn fences(&self, eager: bool) -> bool {
        self.fenced.load(Ordering::Acquire) && self.hooked(eager)
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    pub fn shut_down(&self) {
        self.shutting_down.store(true, Ordering::Release);
    }
}
