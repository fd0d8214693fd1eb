//! The runtime's side of the durable outbox: how the relay delivers into mailboxes, and the
//! guest imports `outbox.dispatch` / `outbox.tell-reliable`.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use sluice_bus::SYSTEM_PRINCIPAL;
use sluice_outbox::{Conflict, Delivery, DeliveryError, NewMessage, OutboxMessage};

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

/// What is exhausted, from an error's text: `RESOURCE_EXHAUSTED: queue busy
/// (retry_after_ms=50)` → `queue busy` (the capacity error puts the code and hint back).
fn capacity_message(text: &str) -> String {
    let body = text.strip_prefix("RESOURCE_EXHAUSTED: ").unwrap_or(text);
    let body = match body.rfind(" (retry_after_ms=") {
        Some(i) if body.ends_with(')') => &body[..i],
        _ => body,
    };
    body.to_string()
}

fn classify(e: ActorError) -> DeliveryError {
    if let Some(ms) = e
        .retry_after_ms
        .filter(|_| e.code == ErrorCode::ResourceExhausted)
    {
        return DeliveryError::Capacity {
            message: capacity_message(&e.to_string()),
            retry_after_ms: ms,
        };
    }
    match e.code {
        // A handler's own error is the guest's verdict on this attempt: retry it, and let
        // max_attempts dead-letter a poison message.
        _ if e.is_verbatim() => DeliveryError::Transient(e.to_string()),
        // The host can never deliver these: an unknown type or a malformed id.
        ErrorCode::NotFound | ErrorCode::InvalidArgument if e.retry_after_ms.is_none() => {
            DeliveryError::Permanent(e.to_string())
        }
        _ => DeliveryError::Transient(e.to_string()),
    }
}

#[async_trait]
impl Delivery for RuntimeDelivery {
    async fn deliver(&self, msg: &OutboxMessage) -> Result<(), DeliveryError> {
        let Some(routes) = self.routes.upgrade() else {
            return Err(DeliveryError::Transient("host shut down".into()));
        };
        let to =
            ActorId::parse(&msg.receiver).map_err(|e| DeliveryError::Permanent(e.to_string()))?;
        // Relayed deliveries are internal: admission caps never refuse them.
        let opts = CallOptions {
            deadline: None,
            principal: principal_of(&msg.headers).map(Arc::from),
            sender: ActorId::parse(&msg.sender).ok(),
            internal: true,
        };
        if msg.mode == "call" {
            let mut opts = opts;
            opts.deadline =
                Some(Instant::now() + self.call_timeout.unwrap_or(Duration::from_secs(30)));
            return routes
                .ask(&to, msg.msg_type.clone(), msg.payload.clone(), opts)
                .await
                .map(drop)
                .map_err(classify);
        }
        match routes
            .tell(&to, msg.msg_type.clone(), msg.payload.clone(), opts)
            .await
        {
            Ok(TellReceipt::Queued | TellReceipt::DisplacedOldest) => Ok(()),
            // The receiver's drop_newest strategy would lose it: treat as a full mailbox.
            Ok(TellReceipt::DroppedNewest) => Err(DeliveryError::mailbox_full(1)),
            Err(e) => Err(classify(e)),
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
        .tell(id, msg_type.clone(), payload.clone(), opts.clone())
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
    let mut m = NewMessage::new(id.to_string(), msg_type, payload);
    if let Some(s) = &opts.sender {
        m = m.with_sender(s.to_string());
    }
    if let Some(p) = opts.principal.as_deref().filter(|p| *p != SYSTEM_PRINCIPAL) {
        m.headers.insert("principal".into(), p.into());
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

fn principal_of(headers: &str) -> Option<String> {
    if headers.len() < 3 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(headers).ok()?;
    v.get("principal")?.as_str().map(str::to_string)
}

/// Builds the stored messages of a guest's dispatch request.
pub(crate) fn dispatch_messages(
    req: &wit::DispatchRequest,
    sender: &ActorId,
    principal: &str,
    max_payload: usize,
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
        wit::DispatchMode::Cast => "cast",
        wit::DispatchMode::Call => "call",
    };
    let mut out = Vec::with_capacity(req.targets.len());
    for t in &req.targets {
        ActorId::parse(t)?;
        let mut m = NewMessage::new(t.clone(), msg_type, req.payload.clone())
            .with_sender(sender.to_string())
            .with_scope(tenant.clone(), namespace.clone())
            .with_mode(mode);
        if principal != SYSTEM_PRINCIPAL {
            m.headers.insert("principal".into(), principal.into());
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
    fn a_capacity_refusal_keeps_what_was_exhausted() {
        assert_eq!(
            classify(ActorError::mailbox_full(40)).to_string(),
            "RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=40)"
        );
        // A handler's own RESOURCE_EXHAUSTED with a hint is a capacity signal too, and keeps
        // its words (it was recorded as "mailbox full").
        let mut guest = ActorError::verbatim(
            ErrorCode::ResourceExhausted,
            "RESOURCE_EXHAUSTED: worker pool busy (retry_after_ms=50)".into(),
        );
        guest.retry_after_ms = Some(50);
        let d = classify(guest);
        assert_eq!(
            d,
            DeliveryError::Capacity {
                message: "worker pool busy".into(),
                retry_after_ms: 50
            }
        );
        assert_eq!(
            d.to_string(),
            "RESOURCE_EXHAUSTED: worker pool busy (retry_after_ms=50)"
        );
        assert_eq!(capacity_message("disk quota"), "disk quota");
    }
}
