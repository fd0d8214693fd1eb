//! `schedule`: a message an actor sends itself after a delay. Timer deliveries are internal
//! (never refused by admission caps); a refusal for capacity (a full mailbox, the activation
//! cap) re-arms the timer after the refusal's hint (at least 10 ms) instead of losing it. Each
//! delivery is a turn on the actor's own clock, so it gets the default deadline.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::call::CallOptions;
use crate::error::{ActorError, ErrorCode};
use crate::id::{ActorId, validate_msg_type};
use crate::local::Local;

/// Arms a timer delivering `msg_type` to `id` after `delay`.
pub(crate) fn schedule(
    local: &Arc<Local>,
    id: &ActorId,
    delay: Duration,
    msg_type: String,
    payload: Vec<u8>,
    principal: Arc<str>,
) -> Result<(), ActorError> {
    validate_msg_type(&msg_type)?;
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
    let local = Arc::downgrade(local);
    let id = id.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let opts = CallOptions {
            principal: Some(principal),
            internal: true,
            ..Default::default()
        };
        loop {
            let Some(local) = local.upgrade() else { break };
            if local.env.is_shutting_down() {
                break;
            }
            let now = Instant::now();
            let deadline = local.env.config.call_timeout().map(|d| now + d);
            let mut make =
                || local.message(msg_type.clone(), payload.clone(), &opts, deadline, now);
            let wait = match local.deliver(&id, false, &mut make) {
                Err(e) if e.is_capacity() => e.retry_after_ms.unwrap_or(10).max(10),
                Err(e) => {
                    tracing::warn!(actor = %id, error = %e, "scheduled message not delivered");
                    break;
                }
                Ok(_) => break,
            };
            drop(local);
            tokio::time::sleep(Duration::from_millis(wait)).await;
        }
        cell.timers.fetch_sub(1, Ordering::Relaxed);
    });
    Ok(())
}
