//! What guests of this host can ask of it ([`GuestHost`]): tells and asks through the host's
//! route, timers, the outbox and the bus.

use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument;

use async_trait::async_trait;

use super::inner::HostInner;
use crate::bindings::wit;
use crate::call::{CallOptions, DeliveryPath, TellReceipt};
use crate::error::{ActorError, ErrorCode};
use crate::guest::GuestHost;
use crate::id::{ActorId, validate_msg_type};
use crate::reliable::{self, RuntimeDelivery, outbox_error};
use crate::timers;
use sluice_bus::SYSTEM_PRINCIPAL;
use sluice_outbox::NewMessage;

impl HostInner {
    fn attached_outbox(&self) -> Result<&Arc<sluice_outbox::Outbox>, ActorError> {
        self.outbox()
            .ok_or_else(|| ActorError::unavailable("the outbox is not enabled on this host"))
    }

    /// The relay's (and `dispatch`'s immediate attempt's) way into actors: this host's route.
    pub(crate) fn delivery(&self) -> RuntimeDelivery {
        RuntimeDelivery {
            routes: Arc::downgrade(&self.routes),
            call_timeout: self.env.config.call_timeout(),
        }
    }

    fn check_payload(&self, len: usize) -> Result<(), ActorError> {
        let max = self.env.config.max_payload_bytes;
        if len > max {
            return Err(ActorError::invalid_argument(format!(
                "payload of {len} bytes exceeds max_payload_bytes={max}"
            )));
        }
        Ok(())
    }

    /// Direct tell first; on any failure store in the outbox.
    pub(crate) async fn tell_reliable(
        &self,
        id: &ActorId,
        msg_type: String,
        payload: Vec<u8>,
        opts: CallOptions,
    ) -> Result<DeliveryPath, ActorError> {
        // Bad input is refused before it can be stored for retrying.
        validate_msg_type(&msg_type)?;
        self.check_payload(payload.len())?;
        let outbox = self.attached_outbox()?;
        reliable::tell_reliable(&self.routes, outbox, id, msg_type, payload, opts).await
    }

    /// A durable reminder to `me` (the WIT `outbox.remind`), stored before this returns.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn remind(
        &self,
        me: &ActorId,
        name: &str,
        delay_ms: u64,
        msg_type: String,
        payload: Vec<u8>,
        principal: &str,
        trace: Option<sluice_trace::TraceParent>,
    ) -> Result<(), ActorError> {
        validate_msg_type(&msg_type)?;
        self.check_payload(payload.len())?;
        if delay_ms > MAX_REMINDER_DELAY_MS {
            return Err(ActorError::invalid_argument(format!(
                "reminder delay_ms={delay_ms} exceeds {MAX_REMINDER_DELAY_MS} (ten years)"
            )));
        }
        let outbox = self.attached_outbox()?;
        let mut m = NewMessage::new(me.to_string(), msg_type, payload)
            .with_sender(me.to_string())
            .with_delay_ms(delay_ms)
            .with_trace(trace);
        if principal != SYSTEM_PRINCIPAL {
            m = m.with_principal(principal);
        }
        let max = self.env.config.max_reminders_per_actor;
        if !outbox.remind(m, name, max).await.map_err(outbox_error)? {
            return Err(ActorError::new(
                ErrorCode::ResourceExhausted,
                format!("{max} reminders already pending for {me} (max_reminders_per_actor)"),
            ));
        }
        Ok(())
    }

    /// Cancels `me`'s pending reminder `name` (the WIT `outbox.cancel-reminder`).
    pub(crate) async fn cancel_reminder(
        &self,
        me: &ActorId,
        name: &str,
    ) -> Result<bool, ActorError> {
        self.attached_outbox()?
            .cancel_reminder(me.as_str(), name)
            .await
            .map_err(outbox_error)
    }
}

/// Longest delay `outbox.remind` takes: ten years, in ms.
const MAX_REMINDER_DELAY_MS: u64 = 10 * 365 * 24 * 3_600_000;

#[async_trait]
impl GuestHost for HostInner {
    async fn tell(
        &self,
        to: &str,
        msg_type: String,
        payload: Vec<u8>,
        opts: CallOptions,
    ) -> Result<TellReceipt, ActorError> {
        let id = ActorId::parse(to)?;
        self.routes.tell(&id, msg_type.into(), payload, opts).await
    }

    async fn ask(
        &self,
        to: &str,
        msg_type: String,
        payload: Vec<u8>,
        opts: CallOptions,
    ) -> Result<Vec<u8>, ActorError> {
        let id = ActorId::parse(to)?;
        self.routes.ask(&id, msg_type, payload, opts).await
    }

    fn schedule(
        &self,
        me: &ActorId,
        delay: Duration,
        msg_type: String,
        payload: Vec<u8>,
        principal: Arc<str>,
        trace: Option<sluice_trace::TraceParent>,
    ) -> Result<(), ActorError> {
        timers::schedule(&self.routes, me, delay, msg_type, payload, principal, trace)
    }

    async fn dispatch(
        &self,
        req: wit::DispatchRequest,
        me: &ActorId,
        principal: &Arc<str>,
        deadline: Option<Instant>,
        trace: Option<sluice_trace::TraceParent>,
    ) -> Result<wit::DispatchResult, ActorError> {
        // The dispatch is a span of the turn's trace; the stored rows carry its context, so
        // every delivery attempt (immediate or relayed) is its child.
        let span = if trace.is_some() {
            let span = tracing::info_span!("outbox.dispatch", targets = req.targets.len() as i64);
            sluice_trace::set_parent(&span, trace);
            span
        } else {
            tracing::Span::none()
        };
        let trace = sluice_trace::of(&span).or(trace);
        let msgs = reliable::dispatch_messages(
            &req,
            me,
            principal,
            self.env.config.max_payload_bytes,
            trace,
        )?;
        for m in &msgs {
            validate_msg_type(&m.msg_type)?;
        }
        // Charged as the bytes it sends: one payload per target.
        let bytes = req.payload.len().saturating_mul(req.targets.len());
        self.check_ipc(me, principal, bytes)?;
        let outbox = self.attached_outbox()?;
        let d = outbox
            .dispatch(msgs, &self.delivery(), deadline)
            .instrument(span)
            .await
            .map_err(outbox_error)?;
        Ok(wit::DispatchResult {
            delivered: d.delivered(),
            deduplicated: d.deduplicated(),
            queued: d.queued(),
            dead_lettered: d.dead_lettered(),
            outcomes: d.outcomes.into_iter().map(dispatch_outcome).collect(),
        })
    }

    async fn tell_reliable(
        &self,
        to: &str,
        msg_type: String,
        payload: Vec<u8>,
        opts: CallOptions,
    ) -> Result<DeliveryPath, ActorError> {
        let id = ActorId::parse(to)?;
        HostInner::tell_reliable(self, &id, msg_type, payload, opts).await
    }

    async fn remind(
        &self,
        me: &ActorId,
        name: &str,
        delay_ms: u64,
        msg_type: String,
        payload: Vec<u8>,
        principal: &Arc<str>,
        trace: Option<sluice_trace::TraceParent>,
    ) -> Result<(), ActorError> {
        HostInner::remind(
            self, me, name, delay_ms, msg_type, payload, principal, trace,
        )
        .await
    }

    async fn cancel_reminder(&self, me: &ActorId, name: &str) -> Result<bool, ActorError> {
        HostInner::cancel_reminder(self, me, name).await
    }

    fn publish(
        &self,
        from: &ActorId,
        principal: &Arc<str>,
        topic: &str,
        payload: Vec<u8>,
        trace: Option<sluice_trace::TraceParent>,
    ) -> Result<(), ActorError> {
        self.bus
            .publish(Some(from), principal, topic, payload, trace)
            .map(drop)
    }

    fn check_ipc(&self, from: &ActorId, principal: &str, bytes: usize) -> Result<(), ActorError> {
        self.bus.check_ipc(from, principal, bytes)
    }

    fn system(&self) -> Arc<str> {
        self.local().system.clone()
    }
}

/// The outbox's outcome for one target as the WIT's. The WIT's `dispatch` request has no
/// delay, so `QueuedDelayed` cannot come from it; were it to, the row is left for the relay
/// like one behind a pending message, the nearest WIT outcome (and counted as queued either way).
fn dispatch_outcome(o: sluice_outbox::DispatchOutcome) -> wit::DispatchOutcome {
    use sluice_outbox::DispatchOutcome as O;
    match o {
        O::Delivered => wit::DispatchOutcome::Delivered,
        O::Deduplicated => wit::DispatchOutcome::Deduplicated,
        O::QueuedBehindPending | O::QueuedDelayed => wit::DispatchOutcome::QueuedBehindPending,
        O::QueuedAtLimit => wit::DispatchOutcome::QueuedAtLimit,
        O::QueuedRefused => wit::DispatchOutcome::QueuedRefused,
        O::QueuedFailed => wit::DispatchOutcome::QueuedFailed,
        O::QueuedOutOfTime => wit::DispatchOutcome::QueuedOutOfTime,
        O::NotFound => wit::DispatchOutcome::NotFound,
        O::Expired => wit::DispatchOutcome::Expired,
        O::DeadLettered => wit::DispatchOutcome::DeadLettered,
    }
}
