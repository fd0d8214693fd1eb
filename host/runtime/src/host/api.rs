//! [`Host`]: the Rust embedding API of a running host.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::deploy::Deployed;
use super::inner::HostInner;
use super::status::TypeStatus;
use crate::call::{CallOptions, DeliveryPath, TellReceipt};
use crate::config::{ChildSpec, HostConfig, Subscription};
use crate::error::{ActorError, HostError, LoadError};
use crate::events::SubscriptionStats;
use crate::id::ActorId;
use crate::route::Route;

/// A running Sluice host. Cheap to clone; all clones share one engine and registry.
#[derive(Clone)]
pub struct Host {
    pub(super) inner: Arc<HostInner>,
}

impl Host {
    /// Starts a host (engine, epoch ticker, linker). Must run inside a tokio runtime.
    pub fn new(config: HostConfig) -> Result<Self, HostError> {
        Ok(Self {
            inner: HostInner::start(config)?,
        })
    }

    /// The host's settings.
    pub fn config(&self) -> &HostConfig {
        &self.inner.env.config
    }

    /// Loads (or replaces) an actor type from component bytes. Turns in progress finish on
    /// the old code; later turns and new activations use the new code; nothing queued is lost.
    /// Deploying the spec and bytes of the version already serving changes nothing and
    /// returns that version.
    pub async fn deploy(&self, spec: ChildSpec, wasm: Vec<u8>) -> Result<u64, LoadError> {
        Ok(self.inner.deploy(spec, wasm).await?.version)
    }

    /// As [`Host::deploy`], saying whether anything changed and whether the machine code was
    /// compiled or came from the cache, and how long that took.
    pub async fn deploy_report(
        &self,
        spec: ChildSpec,
        wasm: Vec<u8>,
    ) -> Result<Deployed, LoadError> {
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

    /// Attaches a durable outbox and starts its relay, delivering through this host's route.
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
            let delivery = Arc::new(self.inner.delivery());
            let mut relay = self.inner.relay.lock();
            let handle = match &relay.scope {
                Some(parts) => ob.start_relay_for(delivery, parts.iter().copied()),
                None => ob.start_relay(delivery),
            };
            relay.handle = Some(handle);
        }
        ob
    }

    /// Relays only `partitions` of the outbox from now on (a cluster member's share of a
    /// shared Postgres outbox); called before [`Host::attach_outbox`], the relay starts with
    /// them. Without a call a host relays every partition. Ends when the workers of the
    /// partitions left out have finished their current batch and given the partitions up.
    pub async fn relay_partitions(&self, partitions: impl IntoIterator<Item = u32>) {
        let partitions: Vec<u32> = partitions.into_iter().collect();
        let stopping = {
            let mut relay = self.inner.relay.lock();
            relay.scope = Some(partitions.clone());
            relay.handle.as_mut().map(|h| h.assign(partitions))
        };
        if let Some(stopping) = stopping {
            stopping.await;
        }
    }

    /// The partitions this host's relay runs now (empty before an outbox is attached).
    pub fn relayed_partitions(&self) -> Vec<u32> {
        self.inner
            .relay
            .lock()
            .handle
            .as_ref()
            .map(|h| h.partitions())
            .unwrap_or_default()
    }

    /// The attached outbox (DLQ list/replay/purge, stats).
    pub fn outbox(&self) -> Option<&Arc<sluice_outbox::Outbox>> {
        self.inner.outbox()
    }

    /// Sends every tell and ask of this host through `route` from now on (a cluster's, which
    /// falls back to [`Host::local_route`] for the actors this host runs). Once per host.
    pub fn set_route(&self, route: Arc<dyn Route>) -> Result<(), ActorError> {
        self.inner.routes.install(route)
    }

    /// This host's own activations as a route.
    pub fn local_route(&self) -> Arc<dyn Route> {
        self.inner.routes.local.clone()
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

    /// Arms a durable reminder for actor `to` from outside any actor, as if `to` had armed it
    /// (the WIT `outbox.remind`): stored before this returns, then delivered to `to`, with
    /// `to` as its sender, once `delay` has passed, at least once, on whichever host runs it
    /// then. A non-empty `name` replaces `to`'s pending reminder of that name.
    ///
    /// Errors as for guests: `INVALID_ARGUMENT` (bad id, type or name, payload over the
    /// limit, a delay over ten years), `RESOURCE_EXHAUSTED` at `max_reminders_per_actor`,
    /// `UNAVAILABLE` without an outbox.
    pub async fn remind(
        &self,
        to: &str,
        name: &str,
        delay: Duration,
        msg_type: &str,
        payload: impl Into<Vec<u8>>,
    ) -> Result<(), ActorError> {
        let id = ActorId::parse(to)?;
        let delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.inner
            .remind(
                &id,
                name,
                delay_ms,
                msg_type.to_string(),
                payload.into(),
                sluice_bus::SYSTEM_PRINCIPAL,
                None,
            )
            .await
    }

    /// Cancels `to`'s pending reminder `name`: whether one was pending. One already due and
    /// moved into the outbox is being delivered and is not cancelled.
    pub async fn cancel_reminder(&self, to: &str, name: &str) -> Result<bool, ActorError> {
        let id = ActorId::parse(to)?;
        self.inner.cancel_reminder(&id, name).await
    }

    /// Stops the host and waits for the outbox relay to finish its current batch.
    pub async fn stop(&self) {
        self.shutdown();
        let relay = self.inner.relay.lock().handle.take();
        if let Some(r) = relay {
            r.shutdown().await;
        }
    }

    /// Stops accepting messages and ends every activation after its current turn.
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }

    /// Fire and forget from outside any actor.
    pub async fn tell(
        &self,
        to: &str,
        msg_type: &str,
        payload: impl Into<Vec<u8>>,
    ) -> Result<TellReceipt, ActorError> {
        self.tell_with(to, msg_type, payload, CallOptions::default())
            .await
    }

    /// Fire and forget to a parsed id. A refusal by a full mailbox allocates nothing.
    pub async fn tell_to(
        &self,
        to: &ActorId,
        msg_type: &str,
        payload: Vec<u8>,
    ) -> Result<TellReceipt, ActorError> {
        self.inner
            .routes
            .tell(to, msg_type.into(), payload, CallOptions::default())
            .await
    }

    /// Fire and forget with explicit options.
    pub async fn tell_with(
        &self,
        to: &str,
        msg_type: &str,
        payload: impl Into<Vec<u8>>,
        opts: CallOptions,
    ) -> Result<TellReceipt, ActorError> {
        let id = ActorId::parse(to)?;
        self.inner
            .routes
            .tell(&id, msg_type.into(), payload.into(), opts)
            .await
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
        self.ask_with(to, msg_type, payload, opts).await
    }

    /// Request/reply with explicit options.
    pub async fn ask_with(
        &self,
        to: &str,
        msg_type: &str,
        payload: impl Into<Vec<u8>>,
        opts: CallOptions,
    ) -> Result<Vec<u8>, ActorError> {
        let id = ActorId::parse(to)?;
        self.inner
            .routes
            .ask(&id, msg_type.to_string(), payload.into(), opts)
            .await
    }

    /// Per-type status.
    pub fn status(&self) -> Vec<TypeStatus> {
        self.inner.status()
    }

    /// Turns running right now.
    pub fn inflight_turns(&self) -> u64 {
        self.inner.env.inflight.load(Ordering::Relaxed)
    }

    /// Queued + running turns host-wide, as the `max_inflight_turns` cap counts them (always
    /// 0 when that cap is off: the count is not kept then).
    pub fn admission_depth(&self) -> u64 {
        self.inner.local().admission.host_depth()
    }

    /// Publishes `payload` on `topic` on behalf of `principal` (`None` = `system`), as the
    /// host or an embedder: no sending actor, not rate-limited. A bad topic is
    /// `INVALID_ARGUMENT`. Succeeds with no subscriber (the report says whom it reached).
    /// Published inside a traced span, the event carries its context to every delivery.
    pub fn publish(
        &self,
        topic: &str,
        payload: impl Into<Vec<u8>>,
        principal: Option<&str>,
    ) -> Result<sluice_bus::PublishReport, ActorError> {
        let principal = principal.map_or_else(|| self.inner.local().system.clone(), Arc::from);
        self.inner.bus.publish(
            None,
            &principal,
            topic,
            payload.into(),
            sluice_trace::current(),
        )
    }

    /// Adds a subscription at run time (the app config's `[[bus.subscriptions]]` are added
    /// by [`Host::new`]). A bad pattern is [`LoadError::Subscription`].
    pub fn subscribe(&self, sub: Subscription) -> Result<(), LoadError> {
        self.inner.bus.subscribe(&self.inner.routes, sub)
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
}
