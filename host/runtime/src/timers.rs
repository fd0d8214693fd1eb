//! `schedule`: a message an actor sends itself after a delay. Timer deliveries are internal
//! (never refused by admission caps); a refusal for capacity (a full mailbox, the activation
//! cap) re-arms the timer after the refusal's hint (at least 10 ms) instead of losing it. Each
//! delivery is a turn on the actor's own clock, so it gets the default deadline. A message
//! scheduled by a traced turn is delivered in that trace: its turn is the scheduling turn's
//! child, however long the delay.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::call::CallOptions;
use crate::error::{ActorError, ErrorCode};
use crate::id::{ActorId, validate_msg_type};
use crate::routing::Routes;

/// Arms a timer delivering `msg_type` to `id` after `delay`. It fires through the host's
/// route, like any tell: in a cluster the actor may have deactivated and been activated on
/// another member meanwhile (or nowhere), and the message follows it there.
pub(crate) fn schedule(
    routes: &Arc<Routes>,
    id: &ActorId,
    delay: Duration,
    msg_type: String,
    payload: Vec<u8>,
    principal: Arc<str>,
    trace: Option<sluice_trace::TraceParent>,
) -> Result<(), ActorError> {
    validate_msg_type(&msg_type)?;
    let local = &routes.local;
    let max_payload = local.env.config.max_payload_bytes;
    if payload.len() > max_payload {
        return Err(ActorError::invalid_argument(format!(
            "payload of {} bytes exceeds max_payload_bytes={max_payload}",
            payload.len()
        )));
    }
    let entry = local
        .registry
        .get(id.actor_type())
        .ok_or_else(|| ActorError::not_found("actor type gone"))?;
    let cell = local.cell(&entry, id, false)?;
    let max = local.env.config.max_timers_per_actor;
    if cell.timers.fetch_add(1, Ordering::Relaxed) >= max {
        cell.timers.fetch_sub(1, Ordering::Relaxed);
        return Err(ActorError::new(
            ErrorCode::ResourceExhausted,
            format!("{max} timers already pending for {id} (max_timers_per_actor)"),
        ));
    }
    let routes = Arc::downgrade(routes);
    let id = id.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        loop {
            let Some(routes) = routes.upgrade() else {
                break;
            };
            let env = &routes.local.env;
            if env.is_shutting_down() {
                break;
            }
            let opts = CallOptions {
                deadline: env.config.call_timeout().map(|d| Instant::now() + d),
                principal: Some(principal.clone()),
                internal: true,
                trace,
                ..Default::default()
            };
            let sent = routes
                .tell(&id, Cow::Borrowed(&msg_type), payload.clone(), opts)
                .await;
            let wait = match sent {
                Err(e) if e.is_capacity() => e.retry_after_ms.unwrap_or(10).max(10),
                Err(e) => {
                    tracing::warn!(actor = %id, error = %e, "scheduled message not delivered");
                    break;
                }
                Ok(_) => break,
            };
            drop(routes);
            tokio::time::sleep(Duration::from_millis(wait)).await;
        }
        cell.timers.fetch_sub(1, Ordering::Relaxed);
    });
    Ok(())
}
