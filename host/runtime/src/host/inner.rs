//! Everything a running host holds, wired together: the engine and its ticker, the local route
//! and whatever route replaced it, the bus, the outbox once attached.

use std::sync::{Arc, OnceLock};

use wasmtime::component::{HasSelf, Linker};

use crate::actor::env::Env;
use crate::admission::Admission;
use crate::bindings::ActorWorld;
use crate::config::HostConfig;
use crate::engine::{ComponentCache, EpochTicker, build_engine};
use crate::error::HostError;
use crate::events::HostBus;
use crate::guest::{GuestHost, StoreState};
use crate::local::Local;
use crate::routing::Routes;

/// The outbox relay: its workers once the outbox is attached, and the partitions it is to
/// relay when a caller narrowed them (`None`: all).
#[derive(Default)]
pub(super) struct Relay {
    pub handle: Option<sluice_outbox::RelayHandle>,
    pub scope: Option<Vec<u32>>,
}

/// Everything a running host holds; [`Host`] is a cheap handle on it.
pub(crate) struct HostInner {
    pub env: Arc<Env>,
    pub routes: Arc<Routes>,
    pub(super) linker: Linker<StoreState>,
    pub(super) cache: ComponentCache,
    /// The durable outbox, once attached (`sluice run` always attaches one).
    pub(super) outbox: OnceLock<Arc<sluice_outbox::Outbox>>,
    pub(super) relay: parking_lot::Mutex<Relay>,
    /// The event bus, its rate limiter and its subscriptions.
    pub bus: HostBus,
    /// Per actor type, the fingerprint of its last deploy (spec and module bytes) and the
    /// version it made: a byte-identical redeploy keeps that version. Cold path (deploys).
    pub(super) deployed: parking_lot::Mutex<std::collections::HashMap<String, ([u8; 32], u64)>>,
    _ticker: EpochTicker,
}

impl HostInner {
    /// Starts the engine, its ticker and the linker, and the bus's subscriptions.
    pub(super) fn start(config: HostConfig) -> Result<Arc<Self>, HostError> {
        config.validate()?;
        let engine = build_engine(&config)?;
        let mut linker = Linker::new(&engine);
        let link = |e: wasmtime::Error| HostError::Link(format!("{e:#}"));
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(link)?;
        ActorWorld::add_to_linker::<StoreState, HasSelf<StoreState>>(&mut linker, |s| s)
            .map_err(link)?;
        crate::bindings::batched::sluice::actor::turns::add_to_linker::<
            StoreState,
            HasSelf<StoreState>,
        >(&mut linker, |s| s)
        .map_err(link)?;
        let cache = ComponentCache::new(engine.clone(), config.cache_dir.clone());
        let ticker = EpochTicker::start(engine.clone());
        let bus = HostBus::new(&config.bus, config.max_payload_bytes);
        let subscriptions = config.bus.subscriptions.clone();
        let admission = Admission::new(&config);
        let env = Arc::new(Env::new(engine, config));
        let local = Arc::new(Local {
            env: env.clone(),
            registry: Default::default(),
            admission,
            system: Arc::from(sluice_bus::SYSTEM_PRINCIPAL),
        });
        let inner = Arc::new(Self {
            env,
            routes: Arc::new(Routes::new(local)),
            linker,
            cache,
            outbox: OnceLock::new(),
            relay: parking_lot::Mutex::new(Relay::default()),
            bus,
            deployed: Default::default(),
            _ticker: ticker,
        });
        let services: Arc<dyn GuestHost> = inner.clone();
        inner.env.set_services(Arc::downgrade(&services));
        for sub in subscriptions {
            inner.bus.subscribe(&inner.routes, sub)?;
        }
        Ok(inner)
    }

    pub fn local(&self) -> &Arc<Local> {
        &self.routes.local
    }

    pub fn outbox(&self) -> Option<&Arc<sluice_outbox::Outbox>> {
        self.outbox.get()
    }

    /// Stops accepting messages and ends every activation after its current turn.
    pub fn shutdown(&self) {
        self.env.shut_down();
        self.bus.stop();
        for t in self.local().registry.all() {
            for c in t.cells() {
                c.notify.notify_one();
            }
        }
    }
}

impl Drop for HostInner {
    /// A host nobody holds any more ends its activations (their tasks hold the engine).
    fn drop(&mut self) {
        self.shutdown();
    }
}
