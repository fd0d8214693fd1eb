//! Registering a subscription: its receiver, its queue on the bus (routed intake or a reader
//! of the broadcast ring) and the task that moves its events into the receiver's mailbox.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use sluice_bus::DispatcherConfig;
use tokio::sync::Semaphore;

use super::dispatch::run_dispatch;
use super::pump::{Pump, Source};
use super::stats::Shared;
use super::{DELIVERIES_TOTAL, DELIVERY_RETRIES_TOTAL, HostBus, intern};
use crate::config::{Subscription, SubscriptionMode};
use crate::error::LoadError;
use crate::id::ActorId;
use crate::routing::Routes;

impl HostBus {
    /// Registers `sub` and starts its pump. A routed subscription queues events from now on,
    /// even before its actor type is deployed.
    pub(crate) fn subscribe(
        &self,
        routes: &Arc<Routes>,
        sub: Subscription,
    ) -> Result<(), LoadError> {
        sub.validate()?;
        let target = ActorId::parse(&sub.receiver()).map_err(|e| LoadError::Subscription {
            actor_type: sub.actor_type.clone(),
            topic: sub.topic.clone(),
            reason: e.to_string(),
        })?;
        let label = intern(&sub.actor_type);
        let bad = |e: sluice_bus::TopicError| LoadError::Subscription {
            actor_type: sub.actor_type.clone(),
            topic: sub.topic.clone(),
            reason: e.to_string(),
        };
        let source = match sub.mode {
            SubscriptionMode::Routed | SubscriptionMode::Dispatch => {
                Source::Routed(self.bus.subscribe_routed(&sub.topic, label).map_err(bad)?)
            }
            SubscriptionMode::Broadcast => {
                Source::Broadcast(self.bus.subscribe_topic(&sub.topic, label).map_err(bad)?)
            }
        };
        let shared = Arc::new(Shared {
            route: match &source {
                Source::Routed(rx) => Some(rx.stats_handle()),
                Source::Broadcast(_) => None,
            },
            target,
            dispatch: OnceLock::new(),
            delivered: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            retried: AtomicU64::new(0),
            lagged: AtomicU64::new(0),
            m_delivered: metrics::counter!(DELIVERIES_TOTAL, "actor_type" => label, "outcome" => "delivered"),
            m_dropped: metrics::counter!(DELIVERIES_TOTAL, "actor_type" => label, "outcome" => "dropped"),
            m_retried: metrics::counter!(DELIVERY_RETRIES_TOTAL, "actor_type" => label),
            sub,
        });
        self.subs.lock().push(shared.clone());
        if shared.sub.mode == SubscriptionMode::Dispatch {
            let Source::Routed(rx) = source else {
                unreachable!("dispatch subscriptions take routed intake")
            };
            let config = DispatcherConfig {
                queue_capacity: self.settings.dispatch_queue_capacity,
                idle_grace: Duration::from_millis(self.settings.dispatch_idle_ms),
                max_queues_per_actor_type: self.settings.dispatch_max_queues_per_actor_type,
            };
            tokio::spawn(run_dispatch(
                Arc::downgrade(routes),
                shared,
                config,
                self.stop.subscribe(),
                rx,
            ));
            return Ok(());
        }
        let pump = Pump {
            routes: Arc::downgrade(routes),
            shared,
            window: Arc::new(Semaphore::new(self.window)),
            stop: self.stop.subscribe(),
        };
        tokio::spawn(pump.run(source));
        Ok(())
    }
}
