//! The runtime's side of the durable outbox: how the relay delivers into mailboxes, and the
//! guest imports `outbox.dispatch` / `outbox.tell-reliable`.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use sluice_bus::SYSTEM_PRINCIPAL;
use sluice_outbox::{
    Conflict, Delivery, DeliveryError, DispatchMode, Envelope, Exhausted, NewMessage,
};

use crate::bindings::wit;
use crate::call::{CallOptions, DeliveryPath, TellReceipt};
use crate::error::{ActorError, ErrorCode};
use crate::id::ActorId;
use crate::routing::Routes;

/// Delivers stored messages into actor mailboxes for the relay.
///
/// `cast` (the default) is delivered once it is in the receiver's mailbox; `call` only once
/// the receiver's handler returned success, so a handler error is retried and, after
/// `max_attempts`, dead-lettered (a poison message).
pub(crate) struct RuntimeDelivery {
    pub routes: Weak<Routes>,
    /// The host's `call_timeout_ms`, for a call-mode delivery with no deadline of its own.
    pub call_timeout: Option<Duration>,
}

/// How long a relayed `call` waits for the handler when the host has no `call_timeout_ms`.
const RELAYED_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// An `ActorError` as the relay's typed verdict. A capacity refusal keeps its structure: what
/// the host says is exhausted (its detail, never re-read from the rendered text), or a
/// handler's own message as it gave it.
fn classify(e: ActorError) -> DeliveryError {
    // This host is cut off from its cluster: not the message's failure.
    if e.is_isolated() {
        return DeliveryError::Unroutable(e.to_string());
    }
    if let Some(retry_after_ms) = e.retry_after_ms.filter(|_| e.is_capacity()) {
        let exhausted = match e.detail() {
            _ if e.is_mailbox_full() => Exhausted::Mailbox,
            Some(what) => Exhausted::Host(what.to_string()),
            None => Exhausted::Handler(e.to_string()),
        };
        return DeliveryError::Capacity {
            exhausted,
            retry_after_ms,
        };
    }
    match e.code {
        // A handler's own error is the guest's verdict on this attempt: retry it, and let
        // max_attempts dead-letter a poison message.
        _ if e.is_verbatim() => DeliveryError::Transient(e.to_string()),
        // The host can never deliver these: an unknown type or a malformed id. An unknown type
        // stays typed so `dispatch` can say `not-found`.
        ErrorCode::NotFound if e.retry_after_ms.is_none() => DeliveryError::NotFound(e.to_string()),
        ErrorCode::InvalidArgument if e.retry_after_ms.is_none() => {
            DeliveryError::Permanent(e.to_string())
        }
        _ => DeliveryError::Transient(e.to_string()),
    }
}

#[async_trait]
impl Delivery for RuntimeDelivery {
    async fn deliver(&self, env: Envelope) -> Result<(), DeliveryError> {
        let Some(routes) = self.routes.upgrade() else {
            return Err(DeliveryError::Transient("host shut down".into()));
        };
        let to =
            ActorId::parse(&env.receiver).map_err(|e| DeliveryError::Permanent(e.to_string()))?;
        // Relayed deliveries are internal: admission caps never refuse them.
        let mut opts = CallOptions {
            deadline: None,
            principal: env.principal.map(Arc::from),
            sender: ActorId::parse(&env.sender).ok(),
            internal: true,
            // The relay attempt's span (this runs inside it): the receiving turn is its child.
            trace: sluice_trace::current(),
        };
        let payload: Vec<u8> = env.payload.into();
        match env.mode {
            DispatchMode::Call => {
                // The dispatching turn's deadline when there is one (what is left of its
                // budget); the relay's own attempts get the host's call timeout.
                opts.deadline = Some(env.deadline.unwrap_or_else(|| {
                    Instant::now() + self.call_timeout.unwrap_or(RELAYED_CALL_TIMEOUT)
                }));
                routes
                    .ask(&to, env.msg_type, payload, opts)
                    .await
                    .map(drop)
                    .map_err(classify)
            }
            // Delivered once queued: no deadline rides along (a queued message past it would
            // be skipped after the outbox acked it).
            DispatchMode::Cast => {
                match routes.tell(&to, env.msg_type.into(), payload, opts).await {
                    Ok(TellReceipt::Queued | TellReceipt::DisplacedOldest) => Ok(()),
                    // The receiver's drop_newest strategy would lose it: treat as a full mailbox.
                    Ok(TellReceipt::DroppedNewest) => Err(DeliveryError::mailbox_full(1)),
                    Err(e) => Err(classify(e)),
                }
            }
        }
    }
}

/// Direct tell first; on any failure (or a drop by the strategy) store in the outbox. An error
/// only when both fail.
pub(crate) async fn tell_reliable(
    routes: &Routes,
    outbox: &sluice_outbox::Outbox,
    id: &ActorId,
    msg_type: String,
    payload: Vec<u8>,
    opts: CallOptions,
) -> Result<DeliveryPath, ActorError> {
    let direct = match routes
        .tell(id, msg_type.as_str().into(), payload.clone(), opts.clone())
        .await
    {
        Ok(TellReceipt::Queued | TellReceipt::DisplacedOldest) => {
            metrics::counter!("sluice_tell_reliable_total", "path" => "direct").increment(1);
            return Ok(DeliveryPath::Direct);
        }
        Ok(TellReceipt::DroppedNewest) => ActorError::mailbox_full(1),
        Err(e) => e,
    };
    tracing::debug!(actor = %id, error = %direct, "tell_reliable: direct delivery failed, storing in the outbox");
    let mut m = NewMessage::new(id.to_string(), msg_type, payload).with_trace(opts.trace);
    if let Some(s) = &opts.sender {
        m = m.with_sender(s.to_string());
    }
    if let Some(p) = opts.principal.as_deref().filter(|p| *p != SYSTEM_PRINCIPAL) {
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

/// Builds the stored messages of a guest's dispatch request.
pub(crate) fn dispatch_messages(
    req: &wit::DispatchRequest,
    sender: &ActorId,
    principal: &str,
    max_payload: usize,
    trace: Option<sluice_trace::TraceParent>,
) -> Result<Vec<NewMessage>, ActorError> {
    if req.payload.len() > max_payload {
        return Err(ActorError::invalid_argument(format!(
            "payload of {} bytes exceeds max_payload_bytes={max_payload}",
            req.payload.len()
        )));
    }
    let (tenant, namespace) = scope_of(&req.context)?;
    let msg_type = if req.msg_type.is_empty() {
        "dispatch"
    } else {
        req.msg_type.as_str()
    };
    let conflict = match req.conflict {
        wit::Conflict::Append => Conflict::Append,
        wit::Conflict::Overwrite => Conflict::Overwrite,
    };
    let mode = match req.mode {
        wit::DispatchMode::Cast => DispatchMode::Cast,
        wit::DispatchMode::Call => DispatchMode::Call,
    };
    let mut out = Vec::with_capacity(req.targets.len());
    for t in &req.targets {
        ActorId::parse(t)?;
        let mut m = NewMessage::new(t.clone(), msg_type, req.payload.clone())
            .with_sender(sender.to_string())
            .with_scope(tenant.clone(), namespace.clone())
            .with_mode(mode)
            .with_trace(trace);
        if principal != SYSTEM_PRINCIPAL {
            m = m.with_principal(principal);
        }
        if !req.idempotency_key.is_empty() {
            m = m.with_key(req.idempotency_key.clone(), conflict);
        }
        if let Some(seq) = req.sequence_number {
            m = m.with_sequence(
                i64::try_from(seq)
                    .map_err(|_| ActorError::invalid_argument("sequence-number too large"))?,
            );
        }
        if let Some(ttl) = req.ttl_ms {
            if ttl == 0 {
                return Err(ActorError::invalid_argument("ttl-ms must be positive"));
            }
            m = m.with_ttl_ms(ttl);
        }
        out.push(m);
    }
    Ok(out)
}

/// `{"tenant": .., "namespace": ..}` → scope; empty context = defaults.
fn scope_of(context: &str) -> Result<(String, String), ActorError> {
    if context.trim().is_empty() {
        return Ok(("default".into(), "default".into()));
    }
    let v: serde_json::Value = serde_json::from_str(context)
        .map_err(|e| ActorError::invalid_argument(format!("dispatch context is not JSON: {e}")))?;
    let get = |k: &str| {
        v.get(k)
            .and_then(|x| x.as_str())
            .filter(|s| !s.is_empty())
            .unwrap_or("default")
            .to_string()
    };
    Ok((get("tenant"), get("namespace")))
}

/// An outbox failure as the guest sees it.
pub(crate) fn outbox_error(e: sluice_outbox::Error) -> ActorError {
    match e {
        sluice_outbox::Error::InvalidArgument(m) => ActorError::invalid_argument(m),
        other => ActorError::unavailable(format!("outbox: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hosts_own_cut_off_is_unroutable_not_a_failure_of_the_message() {
        let cut = ActorError::isolated("this host is not connected to NATS now");
        assert_eq!(
            classify(cut),
            DeliveryError::Unroutable("UNAVAILABLE: this host is not connected to NATS now".into())
        );
        // The same words without the mark are an ordinary transient failure.
        let plain = ActorError::unavailable("this host is not connected to NATS now");
        assert!(matches!(classify(plain), DeliveryError::Transient(_)));
    }

    #[test]
    fn a_capacity_refusal_keeps_what_was_exhausted() {
        let full = classify(ActorError::mailbox_full(40));
        assert_eq!(
            full,
            DeliveryError::Capacity {
                exhausted: Exhausted::Mailbox,
                retry_after_ms: 40
            }
        );
        assert_eq!(
            full.to_string(),
            "RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=40)"
        );
        // Another host limit with the same code and a hint is not a mailbox: it keeps its
        // words as the host's, even words that mention a mailbox.
        let cap = ActorError::new(
            ErrorCode::ResourceExhausted,
            "actor type Slow at max_activations=4 with no idle actor to deactivate; mailbox full",
        )
        .with_retry_after(20);
        assert!(!cap.is_mailbox_full());
        assert_eq!(
            classify(cap),
            DeliveryError::Capacity {
                exhausted: Exhausted::Host(
                    "actor type Slow at max_activations=4 with no idle actor to deactivate; mailbox full"
                        .into()
                ),
                retry_after_ms: 20
            }
        );
        // A handler's own RESOURCE_EXHAUSTED with a hint is a capacity signal too, and keeps
        // its words.
        let words = "RESOURCE_EXHAUSTED: worker pool busy (retry_after_ms=50)";
        let mut guest = ActorError::verbatim(ErrorCode::ResourceExhausted, words.into());
        guest.retry_after_ms = Some(50);
        let d = classify(guest);
        assert_eq!(
            d,
            DeliveryError::Capacity {
                exhausted: Exhausted::Handler(words.into()),
                retry_after_ms: 50
            }
        );
        assert_eq!(d.to_string(), words);
        // Without a hint it is the handler's verdict on this attempt, not capacity.
        let no_hint = ActorError::verbatim(ErrorCode::ResourceExhausted, "disk quota".into());
        assert_eq!(
            classify(no_hint),
            DeliveryError::Transient("disk quota".into())
        );
    }
}
