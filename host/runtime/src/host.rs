//! The host: engine, registry and the tell/ask paths shared by the Rust API and guest imports.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use sluice_flow::deadline;
use tokio::sync::oneshot;
use wasmtime::Engine;
use wasmtime::component::{HasSelf, Linker};

use crate::actor::{self, ActorCell, Message, OfferError, Reply};
use crate::admission::Admission;
use crate::bindings::{ActorWorld, ActorWorldPre};
use crate::config::{AppConfig, ChildSpec, HostConfig, Subscription};
use crate::engine::{ComponentCache, EpochTicker, build_engine};
use crate::error::{ActorError, ErrorCode, LoadError, TellReceipt};
use crate::host_bus::{HostBus, SubscriptionStats};
use crate::registry::{ActorId, ActorType, ModuleVersion, Registry};
use crate::reliable::{DeliveryPath, RuntimeDelivery, outbox_error};
use crate::slots::{self, Slots};
use crate::state::StoreState;

/// How a call is made: its deadline, on whose behalf, from whom.
#[derive(Clone, Debug, Default)]
pub struct CallOptions {
    /// Absolute deadline; `None` = the host's `call_timeout_ms` for external calls.
    pub deadline: Option<Instant>,
    /// Who the work is for; `None` = `system`.
    pub principal: Option<Arc<str>>,
    /// The calling actor, if any.
    pub sender: Option<ActorId>,
    /// True when made from inside a turn (non-empty call chain): never refused by admission
    /// caps, and the deadline is inherited rather than defaulted.
    pub internal: bool,
}

pub(crate) struct HostInner {
    pub config: HostConfig,
    pub engine: Engine,
    linker: Linker<StoreState>,
    cache: ComponentCache,
    registry: Registry,
    shutting_down: AtomicBool,
    /// Turns running now, host-wide. Relaxed: a gauge read by admission, not a lock.
    pub inflight: AtomicU64,
    /// Activation slots taken host-wide, at most `max_activations` (see `slots.rs`).
    pub slots: Arc<Slots>,
    /// Admission caps (see `admission.rs`).
    pub admission: Admission,
    /// The principal of calls made on no one's behalf.
    pub system: Arc<str>,
    /// The durable outbox, once attached (`sluice run` always attaches one).
    outbox: OnceLock<Arc<sluice_outbox::Outbox>>,
    relay: parking_lot::Mutex<Option<sluice_outbox::RelayHandle>>,
    /// The event bus, its rate limiter and its subscriptions (`host_bus.rs`).
    pub bus: HostBus,
    _ticker: EpochTicker,
}

impl Drop for HostInner {
    /// A type's cell map and each cell's handle on its type form a cycle that only
    /// deactivation breaks; break it for every cell left, so the types, their modules and the
    /// engine's instance pool (a large virtual mapping) go with the host.
    fn drop(&mut self) {
        for t in self.registry.all() {
            t.cells.lock().clear();
        }
    }
}

impl HostInner {
    pub fn cache(&self) -> &ComponentCache {
        &self.cache
    }

    pub fn linker(&self) -> &Linker<StoreState> {
        &self.linker
    }

    pub fn outbox(&self) -> Option<&Arc<sluice_outbox::Outbox>> {
        self.outbox.get()
    }

    /// Direct tell first; on any failure (or a drop by the strategy) store in the outbox.
    pub async fn tell_reliable(
        self: &Arc<Self>,
        id: &ActorId,
        msg_type: String,
        payload: Vec<u8>,
        opts: CallOptions,
    ) -> Result<DeliveryPath, ActorError> {
        let Some(outbox) = self.outbox.get() else {
            return Err(ActorError::unavailable(
                "the outbox is not enabled on this host",
            ));
        };
        self.check_payload(payload.len())?;
        let direct = match self.tell(id, msg_type.as_str(), payload.clone(), opts.clone()) {
            Ok(TellReceipt::Queued | TellReceipt::DisplacedOldest) => {
                metrics::counter!("sluice_tell_reliable_total", "path" => "direct").increment(1);
                return Ok(DeliveryPath::Direct);
            }
            Ok(TellReceipt::DroppedNewest) => ActorError::mailbox_full(1),
            Err(e) => e,
        };
        tracing::debug!(actor = %id, error = %direct, "tell_reliable: direct delivery failed, storing in the outbox");
        let mut m = sluice_outbox::NewMessage::new(id.to_string(), msg_type, payload);
        if let Some(s) = &opts.sender {
            m = m.with_sender(s.to_string());
        }
        if let Some(p) = opts
            .principal
            .as_deref()
            .filter(|p| *p != sluice_bus::SYSTEM_PRINCIPAL)
        {
            m = m.with_principal(p);
        }
        match outbox.store(m).await {
            Ok(_) => {
                metrics::counter!("sluice_tell_reliable_total", "path" => "outbox").increment(1);
                Ok(DeliveryPath::Outbox)
            }
            Err(e) => {
                metrics::counter!("sluice_tell_reliable_total", "path" => "failed").increment(1);
                Err(ActorError::unavailable(format!(
                    "tell_reliable: direct failed ({direct}), outbox also failed ({e})"
                )))
            }
        }
    }

    /// Stores one message per target and makes one immediate attempt each (see the outbox),
    /// giving up on it at `deadline` (the dispatching turn's).
    pub async fn dispatch(
        self: &Arc<Self>,
        msgs: Vec<sluice_outbox::NewMessage>,
        deadline: Option<Instant>,
    ) -> Result<sluice_outbox::DispatchResult, ActorError> {
        let Some(outbox) = self.outbox.get() else {
            return Err(ActorError::unavailable(
                "the outbox is not enabled on this host",
            ));
        };
        let delivery = RuntimeDelivery {
            host: Arc::downgrade(self),
        };
        outbox
            .dispatch(msgs, &delivery, deadline)
            .await
            .map_err(outbox_error)
    }

    /// Every deployed type.
    pub(crate) fn types(&self) -> Vec<Arc<ActorType>> {
        self.registry.all()
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// The call's deadline: inherited inside a chain, else the caller's own or the default.
    /// A deadline that has already passed fails the call before anything is queued. Returned
    /// with the instant it was resolved at, the message's enqueue time (one clock read).
    fn resolve_deadline(
        &self,
        opts: &CallOptions,
        to: &ActorId,
    ) -> Result<(Option<Instant>, Instant), ActorError> {
        let now = Instant::now();
        let d = deadline::resolve(
            opts.deadline,
            opts.internal,
            now,
            self.config.call_timeout(),
        );
        if deadline::expired(d, now) {
            self.count_deadline_exceeded(to, true);
            return Err(ActorError::deadline_exceeded(true));
        }
        Ok((d, now))
    }

    fn count_deadline_exceeded(&self, to: &ActorId, skipped: bool) {
        if let Some(ty) = self.registry.get(to.actor_type()) {
            if skipped {
                ty.metrics.deadline_skipped.increment(1);
            } else {
                ty.metrics.deadline_running.increment(1);
            }
        }
    }

    fn check_payload(&self, len: usize) -> Result<(), ActorError> {
        if len > self.config.max_payload_bytes {
            return Err(ActorError::invalid_argument(format!(
                "payload of {len} bytes exceeds max_payload_bytes={}",
                self.config.max_payload_bytes
            )));
        }
        Ok(())
    }

    /// Finds (or activates) the cell for `id` and offers the message `make` builds, looking
    /// again when a concurrent deactivation closed the cell it found. An `arrival` (empty call
    /// chain) passes the admission caps first; with every cap off that is one branch.
    pub(crate) fn deliver(
        self: &Arc<Self>,
        id: &ActorId,
        arrival: bool,
        make: &mut dyn FnMut() -> Message,
    ) -> Result<TellReceipt, ActorError> {
        let Some(ty) = self.registry.get(id.actor_type()) else {
            return Err(ActorError::not_found("no such actor type on this host"));
        };
        if self.is_shutting_down() {
            return Err(ActorError::unavailable("host is shutting down"));
        }
        let (cap, mut permit) = if self.admission.enabled() {
            let cap = if arrival {
                ty.max_queued.load(Ordering::Relaxed)
            } else {
                0
            };
            (cap, self.admission.admit_host(arrival)?)
        } else {
            (0, None)
        };
        // The permit moves into the message only if it is queued; a refusal drops it here.
        let mut make = || {
            let mut m = make();
            m.permit = permit.take();
            m
        };
        loop {
            let cell = self.cell(&ty, id, false)?;
            match cell.offer(&mut make, cap) {
                Ok(r) => return Ok(r),
                Err(OfferError::Refused(e)) => {
                    if e.code == ErrorCode::Overloaded {
                        self.admission.count_actor_refusal();
                    }
                    return Err(e);
                }
                Err(OfferError::Closed) => continue,
            }
        }
    }

    /// The live cell for `id`, activating it (spawning its task) when there is none. A new
    /// cell takes its activation slot first, so a key that cannot be activated is refused
    /// here (`RESOURCE_EXHAUSTED` with a retry hint) before anything is queued.
    fn cell(
        self: &Arc<Self>,
        ty: &Arc<ActorType>,
        id: &ActorId,
        eager: bool,
    ) -> Result<Arc<ActorCell>, ActorError> {
        if let Some(c) = ty.cells.lock().get(id.key()) {
            return Ok(c.clone());
        }
        // Not under the cell map's lock: making room may close an idle cell of this type.
        let slot = slots::reserve(self, ty, id)?;
        let mut cells = ty.cells.lock();
        if let Some(c) = cells.get(id.key()) {
            // Another sender created it meanwhile; our slot goes back.
            return Ok(c.clone());
        }
        let module = ty.current();
        let cell = Arc::new(ActorCell::new(
            id.clone(),
            ty.clone(),
            module.spec.mailbox_capacity,
            module.strategy,
            eager,
            slot,
        ));
        cells.insert(Arc::from(id.key()), cell.clone());
        drop(cells);
        tokio::spawn(actor::run(cell.clone(), self.clone()));
        Ok(cell)
    }

    fn message(
        &self,
        msg_type: String,
        payload: Vec<u8>,
        opts: &CallOptions,
        deadline: Option<Instant>,
        enqueued: Instant,
    ) -> Message {
        Message {
            msg_type,
            payload,
            sender: opts.sender.clone(),
            principal: opts
                .principal
                .clone()
                .unwrap_or_else(|| self.system.clone()),
            deadline,
            enqueued,
            reply: None,
            permit: None,
            window_permit: None,
        }
    }

    pub fn tell_str(
        self: &Arc<Self>,
        to: &str,
        msg_type: String,
        payload: Vec<u8>,
        opts: CallOptions,
    ) -> Result<TellReceipt, ActorError> {
        let id = ActorId::parse(to)?;
        self.tell(&id, msg_type, payload, opts)
    }

    pub fn tell<M: Into<String>>(
        self: &Arc<Self>,
        id: &ActorId,
        msg_type: M,
        payload: Vec<u8>,
        opts: CallOptions,
    ) -> Result<TellReceipt, ActorError> {
        self.check_payload(payload.len())?;
        // Only an explicit deadline can have passed already; otherwise the clock is read when
        // the message is built, so a refusal by a full mailbox reads no clock.
        let stamped = match opts.deadline {
            Some(_) => Some(self.resolve_deadline(&opts, id)?),
            None => None,
        };
        let mut parts = Some((msg_type, payload));
        self.deliver(id, !opts.internal, &mut || {
            let (t, p) = parts.take().expect("a message is built at most once");
            let (deadline, now) = stamped.unwrap_or_else(|| {
                let now = Instant::now();
                let d = deadline::resolve(None, opts.internal, now, self.config.call_timeout());
                (d, now)
            });
            self.message(t.into(), p, &opts, deadline, now)
        })
    }

    pub async fn ask_str(
        self: &Arc<Self>,
        to: &str,
        msg_type: String,
        payload: Vec<u8>,
        opts: CallOptions,
    ) -> Result<Vec<u8>, ActorError> {
        let id = ActorId::parse(to)?;
        self.ask(&id, msg_type, payload, opts).await
    }

    pub async fn ask(
        self: &Arc<Self>,
        id: &ActorId,
        msg_type: String,
        payload: Vec<u8>,
        opts: CallOptions,
    ) -> Result<Vec<u8>, ActorError> {
        self.check_payload(payload.len())?;
        if opts.sender.as_ref() == Some(id) {
            return Err(ActorError::invalid_argument(
                "an actor cannot ask itself: its turn would wait on itself",
            ));
        }
        let (deadline, now) = self.resolve_deadline(&opts, id)?;
        let (tx, rx) = oneshot::channel();
        let started = Arc::new(AtomicBool::new(false));
        let mut parts = Some((msg_type, payload, tx));
        let receipt = self.deliver(id, !opts.internal, &mut || {
            let (t, p, tx) = parts.take().expect("a message is built at most once");
            let mut m = self.message(t, p, &opts, deadline, now);
            m.reply = Some(Reply {
                tx,
                started: started.clone(),
            });
            m
        })?;
        match receipt {
            TellReceipt::Queued | TellReceipt::DisplacedOldest => {}
            TellReceipt::DroppedNewest => {
                return Err(ActorError::new(
                    crate::ErrorCode::ResourceExhausted,
                    "message dropped by a full mailbox (strategy=drop_newest)",
                ));
            }
        }
        let replied = match deadline {
            Some(d) => match tokio::time::timeout_at(d.into(), rx).await {
                Ok(r) => r,
                Err(_) => {
                    // Acquire pairs with the Release store when the turn starts.
                    let skipped = !started.load(Ordering::Acquire);
                    self.count_deadline_exceeded(id, skipped);
                    return Err(ActorError::deadline_exceeded(skipped));
                }
            },
            None => rx.await,
        };
        replied.unwrap_or_else(|_| Err(ActorError::unavailable("the actor ended before replying")))
    }

    /// Delivers `msg_type` to `id` itself after `delay`. Timer deliveries are internal: never
    /// refused by admission caps; a full mailbox re-arms them one tick later (the mailbox's
    /// retry hint, at least 10 ms) instead of losing them. Each delivery is a turn on the
    /// actor's own clock, so it gets the default deadline.
    pub fn schedule(
        self: &Arc<Self>,
        id: &ActorId,
        delay: Duration,
        msg_type: String,
        payload: Vec<u8>,
        principal: Arc<str>,
    ) -> Result<(), ActorError> {
        self.check_payload(payload.len())?;
        let ty = self
            .registry
            .get(id.actor_type())
            .ok_or_else(|| ActorError::not_found("actor type gone"))?;
        let cell = self.cell(&ty, id, false)?;
        let max = self.config.max_timers_per_actor;
        if cell.timers.fetch_add(1, Ordering::Relaxed) >= max {
            cell.timers.fetch_sub(1, Ordering::Relaxed);
            return Err(ActorError::new(
                crate::ErrorCode::ResourceExhausted,
                format!("{max} timers already pending for {id} (max_timers_per_actor)"),
            ));
        }
        let host = self.clone();
        let id = id.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let opts = CallOptions {
                principal: Some(principal),
                internal: true,
                ..Default::default()
            };
            loop {
                if host.is_shutting_down() {
                    break;
                }
                // A turn started on the actor's own clock gets the default deadline.
                let now = Instant::now();
                let deadline = host.config.call_timeout().map(|d| now + d);
                let mut make =
                    || host.message(msg_type.clone(), payload.clone(), &opts, deadline, now);
                match host.deliver(&id, false, &mut make) {
                    Err(e) if e.is_capacity() => {
                        tokio::time::sleep(Duration::from_millis(
                            e.retry_after_ms.unwrap_or(10).max(10),
                        ))
                        .await;
                    }
                    Err(e) => {
                        tracing::warn!(actor = %id, error = %e, "scheduled message not delivered");
                        break;
                    }
                    Ok(_) => break,
                }
            }
            cell.timers.fetch_sub(1, Ordering::Relaxed);
        });
        Ok(())
    }

    async fn deploy(self: &Arc<Self>, spec: ChildSpec, bytes: Vec<u8>) -> Result<u64, LoadError> {
        spec.validate()?;
        let strategy = spec.strategy()?;
        let name = spec.actor_type.clone();
        let cache = self.cache.clone();
        let n = name.clone();
        let component = tokio::task::spawn_blocking(move || cache.load(&n, &bytes))
            .await
            .map_err(|e| LoadError::Config(format!("compile task failed: {e}")))??;
        let link = |e: wasmtime::Error| LoadError::Link {
            name: name.clone(),
            reason: format!("{e:#}"),
        };
        let pre = self.linker.instantiate_pre(&component).map_err(link)?;
        let pre = ActorWorldPre::new(pre).map_err(link)?;
        let memory_mb = spec.memory_limit_mb.unwrap_or(self.config.memory_limit_mb);
        let module = ModuleVersion {
            version: 1,
            pre,
            strategy,
            init_json: spec.init_json(),
            memory_limit: (memory_mb as usize) << 20,
            wasi: Arc::new(spec.wasi.clone()),
            spec: spec.clone(),
        };
        let (ty, version) = self.registry.insert_or_replace(&name, module);
        let cap = spec.max_queued.unwrap_or(self.config.max_queued_per_actor);
        ty.max_queued.store(cap, Ordering::Relaxed);
        ty.max_activations
            .store(spec.max_activations.unwrap_or(0), Ordering::Relaxed);
        self.admission.note_type_cap(cap);
        // A stopped actor gets a fresh start with new code; live ones take the new mailbox
        // bounds now rather than at their next activation (nothing queued is dropped).
        ty.cells.lock().retain(|_, c| {
            let mut inbox = c.inbox.lock();
            inbox.mb.set_limits(spec.mailbox_capacity, strategy);
            inbox.state != actor::InboxState::Stopped
        });
        for key in spec.eager_keys() {
            let id = ActorId::new(&name, &key).map_err(|e| LoadError::Config(e.to_string()))?;
            self.cell(&ty, &id, true).map_err(|e| {
                LoadError::Config(format!(
                    "cannot start supervised instance {id}: {e} (count must fit max_activations)"
                ))
            })?;
        }
        tracing::info!(actor_type = %name, version, "module deployed");
        Ok(version)
    }
}

/// A running Sluice host. Cheap to clone; all clones share one engine and registry.
#[derive(Clone)]
pub struct Host {
    inner: Arc<HostInner>,
}

/// What `status` reports per actor type.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TypeStatus {
    /// The type name.
    pub actor_type: String,
    /// Current module version (increments per deploy).
    pub version: u64,
    /// Live activations: instances holding a pool slot (an addressed actor still
    /// activating, or one between a crash and its restart, is not counted).
    pub active: usize,
    /// Messages queued across activations.
    pub queued: usize,
    /// How long the oldest of them has waited, in milliseconds (0 when none is queued).
    pub oldest_queued_ms: u64,
    /// Activations stopped by their supervisor.
    pub stopped: usize,
}

impl Host {
    /// Starts a host (engine, epoch ticker, linker). Must run inside a tokio runtime.
    pub fn new(config: HostConfig) -> anyhow::Result<Self> {
        config.validate()?;
        let engine = build_engine(&config).with_context(|| {
            format!(
                "reserving the instance pool for max_activations={} (~8 GiB of address space per slot, shared by every host in this process)",
                config.max_activations
            )
        })?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        ActorWorld::add_to_linker::<StoreState, HasSelf<StoreState>>(&mut linker, |s| s)?;
        let cache = ComponentCache::new(engine.clone(), config.cache_dir.clone());
        let ticker = EpochTicker::start(engine.clone());
        let admission = Admission::new(&config);
        let bus = HostBus::new(&config.bus);
        let subscriptions = config.bus.subscriptions.clone();
        let host = Self {
            inner: Arc::new(HostInner {
                config,
                engine,
                linker,
                cache,
                registry: Registry::default(),
                shutting_down: AtomicBool::new(false),
                inflight: AtomicU64::new(0),
                slots: Arc::new(Slots::default()),
                admission,
                system: Arc::from("system"),
                outbox: OnceLock::new(),
                relay: parking_lot::Mutex::new(None),
                bus,
                _ticker: ticker,
            }),
        };
        for sub in subscriptions {
            host.inner.subscribe(sub)?;
        }
        Ok(host)
    }

    /// Starts a host for the app in `dir` and deploys every child of its config.
    pub async fn from_app_dir(
        dir: &Path,
        overrides: impl FnMut(&mut HostConfig),
    ) -> anyhow::Result<(Self, AppConfig)> {
        Self::from_app_dir_with(dir, None, overrides).await
    }

    /// As [`Host::from_app_dir`], with the outbox in `database_url` (`sqlite://PATH` or
    /// `postgres://…`) when given.
    pub async fn from_app_dir_with(
        dir: &Path,
        database_url: Option<&str>,
        mut overrides: impl FnMut(&mut HostConfig),
    ) -> anyhow::Result<(Self, AppConfig)> {
        let app = AppConfig::load(dir)?;
        let mut cfg = app.host.clone();
        if cfg.cache_dir.is_none() {
            cfg.cache_dir = Some(dir.join(".sluice").join("cache"));
        }
        cfg.bus = app.bus.clone();
        overrides(&mut cfg);
        let host = Self::new(cfg)?;
        let mut ocfg: sluice_outbox::OutboxConfig = match &app.outbox {
            Some(t) => toml::Value::Table(t.clone())
                .try_into()
                .map_err(|e| LoadError::Config(format!("[outbox]: {e}")))?,
            None => sluice_outbox::OutboxConfig::default(),
        };
        if ocfg.actor_types.is_empty() {
            // One limiter per configured actor type (bulkheads); the set is bounded by config.
            ocfg.actor_types = app
                .supervisor
                .children
                .iter()
                .map(|c| c.actor_type.clone())
                .collect();
        }
        let url = match database_url {
            Some(url) => url.parse::<sluice_outbox::DatabaseUrl>()?,
            None => {
                let d = dir.join(".sluice");
                std::fs::create_dir_all(&d)?;
                sluice_outbox::DatabaseUrl::Sqlite(d.join("outbox.db"))
            }
        };
        let outbox = sluice_outbox::Outbox::open(&url, ocfg).await?;
        // Deploy first so relayed messages find their actor types.
        for child in &app.supervisor.children {
            host.deploy_file(child.clone(), dir).await?;
        }
        host.attach_outbox(outbox);
        Ok((host, app))
    }

    pub(crate) fn inner(&self) -> &Arc<HostInner> {
        &self.inner
    }

    /// The host's settings.
    pub fn config(&self) -> &HostConfig {
        &self.inner.config
    }

    /// Loads (or replaces) an actor type from component bytes. Turns in progress finish on
    /// the old code; later turns and new activations use the new code; nothing queued is lost.
    pub async fn deploy(&self, spec: ChildSpec, wasm: Vec<u8>) -> Result<u64, LoadError> {
        self.inner.deploy(spec, wasm).await
    }

    /// Loads `spec.module` relative to `app_dir` and deploys it.
    pub async fn deploy_file(&self, spec: ChildSpec, app_dir: &Path) -> Result<u64, LoadError> {
        let path = app_dir.join(&spec.module);
        let bytes = tokio::fs::read(&path)
            .await
            .map_err(|source| LoadError::Io {
                path: path.display().to_string(),
                source,
            })?;
        self.deploy(spec, bytes).await
    }

    /// Attaches a durable outbox and starts its relay, delivering into this host's actors.
    /// A host has at most one outbox; a second call is ignored and returns the first.
    pub fn attach_outbox(&self, outbox: sluice_outbox::Outbox) -> Arc<sluice_outbox::Outbox> {
        let mut fresh = false;
        let ob = self
            .inner
            .outbox
            .get_or_init(|| {
                fresh = true;
                Arc::new(outbox)
            })
            .clone();
        if fresh {
            let delivery = Arc::new(RuntimeDelivery {
                host: Arc::downgrade(&self.inner),
            });
            *self.inner.relay.lock() = Some(ob.start_relay(delivery));
        }
        ob
    }

    /// The attached outbox (DLQ list/replay/purge, stats).
    pub fn outbox(&self) -> Option<&Arc<sluice_outbox::Outbox>> {
        self.inner.outbox()
    }

    /// Direct tell first; on any failure the message is stored in the outbox.
    /// An error only when both fail.
    pub async fn tell_reliable(
        &self,
        to: &str,
        msg_type: &str,
        payload: impl Into<Vec<u8>>,
    ) -> Result<DeliveryPath, ActorError> {
        let id = ActorId::parse(to)?;
        self.inner
            .tell_reliable(
                &id,
                msg_type.to_string(),
                payload.into(),
                CallOptions::default(),
            )
            .await
    }

    /// Stops the host and waits for the outbox relay to finish its current batch.
    pub async fn stop(&self) {
        self.shutdown();
        let relay = self.inner.relay.lock().take();
        if let Some(r) = relay {
            r.shutdown().await;
        }
    }

    /// Fire and forget from outside any actor.
    pub fn tell(
        &self,
        to: &str,
        msg_type: &str,
        payload: impl Into<Vec<u8>>,
    ) -> Result<TellReceipt, ActorError> {
        self.inner.tell_str(
            to,
            msg_type.to_string(),
            payload.into(),
            CallOptions::default(),
        )
    }

    /// Fire and forget to a parsed id. A refusal by a full mailbox allocates nothing.
    pub fn tell_to(
        &self,
        to: &ActorId,
        msg_type: &str,
        payload: Vec<u8>,
    ) -> Result<TellReceipt, ActorError> {
        self.inner
            .tell(to, msg_type, payload, CallOptions::default())
    }

    /// Request/reply from outside any actor, with its own timeout (which is the deadline).
    /// A zero timeout is `INVALID_ARGUMENT`, refused before sending.
    pub async fn ask(
        &self,
        to: &str,
        msg_type: &str,
        payload: impl Into<Vec<u8>>,
        timeout: Duration,
    ) -> Result<Vec<u8>, ActorError> {
        if timeout.is_zero() {
            return Err(ActorError::invalid_argument(
                "ask timeout must be a positive duration",
            ));
        }
        let opts = CallOptions {
            deadline: Some(Instant::now() + timeout),
            ..Default::default()
        };
        self.inner
            .ask_str(to, msg_type.to_string(), payload.into(), opts)
            .await
    }

    /// Request/reply with explicit options.
    pub async fn ask_with(
        &self,
        to: &str,
        msg_type: &str,
        payload: impl Into<Vec<u8>>,
        opts: CallOptions,
    ) -> Result<Vec<u8>, ActorError> {
        self.inner
            .ask_str(to, msg_type.to_string(), payload.into(), opts)
            .await
    }

    /// Fire and forget with explicit options.
    pub fn tell_with(
        &self,
        to: &str,
        msg_type: &str,
        payload: impl Into<Vec<u8>>,
        opts: CallOptions,
    ) -> Result<TellReceipt, ActorError> {
        self.inner
            .tell_str(to, msg_type.to_string(), payload.into(), opts)
    }

    /// Per-type status.
    pub fn status(&self) -> Vec<TypeStatus> {
        let mut out: Vec<TypeStatus> = self
            .inner
            .registry
            .all()
            .into_iter()
            .map(|t| {
                let cells: Vec<Arc<ActorCell>> = t.cells.lock().values().cloned().collect();
                let (mut queued, mut oldest) = (0, None::<Instant>);
                for (n, first) in cells.iter().map(|c| c.queue()) {
                    queued += n;
                    oldest = match (oldest, first) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                TypeStatus {
                    actor_type: t.name.to_string(),
                    version: t.current().version,
                    active: cells
                        .iter()
                        .filter(|c| c.live.load(Ordering::Acquire))
                        .count(),
                    queued,
                    oldest_queued_ms: oldest.map_or(0, |t| t.elapsed().as_millis() as u64),
                    stopped: cells
                        .iter()
                        .filter(|c| c.inbox.lock().state == actor::InboxState::Stopped)
                        .count(),
                }
            })
            .collect();
        out.sort_by(|a, b| a.actor_type.cmp(&b.actor_type));
        out
    }

    /// Turns running right now.
    pub fn inflight_turns(&self) -> u64 {
        self.inner.inflight.load(Ordering::Relaxed)
    }

    /// Publishes `payload` on `topic` on behalf of `principal` (`None` = `system`), as the
    /// host or an embedder: no sending actor, not rate-limited. A bad topic is
    /// `INVALID_ARGUMENT`. Succeeds with no subscriber (the report says whom it reached).
    pub fn publish(
        &self,
        topic: &str,
        payload: impl Into<Vec<u8>>,
        principal: Option<&str>,
    ) -> Result<sluice_bus::PublishReport, ActorError> {
        let principal = principal.map_or_else(|| self.inner.system.clone(), Arc::from);
        self.inner.publish(None, &principal, topic, payload.into())
    }

    /// Adds a subscription at run time (the app config's `[[bus.subscriptions]]` are added
    /// by [`Host::new`]). A bad pattern is [`LoadError::Subscription`].
    pub fn subscribe(&self, sub: Subscription) -> Result<(), LoadError> {
        self.inner.subscribe(sub)
    }

    /// Delivery counters, depth, bytes and age of every subscription.
    pub fn bus_stats(&self) -> Vec<SubscriptionStats> {
        self.inner.bus.stats()
    }

    /// The underlying bus, for embedders that consume events in Rust (`subscribe`,
    /// `subscribe_routed`).
    pub fn event_bus(&self) -> &sluice_bus::EventBus {
        &self.inner.bus.bus
    }

    /// Stops accepting messages and ends every activation after its current turn.
    pub fn shutdown(&self) {
        self.inner.shutting_down.store(true, Ordering::Release);
        self.inner.bus.stop();
        for t in self.inner.registry.all() {
            for c in t.cells.lock().values() {
                c.notify.notify_one();
            }
        }
    }
}
